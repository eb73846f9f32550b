package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/cmd/internal/apiconf"
	"github.com/agentfy/agentfy/cmd/internal/operator"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

const devSecret = "test-secret-test-secret-test-secret!"

// TestOperatorCommands runs seed, token, orgkey and session start|stop against a
// redis-server, or the Cluster or Sentinel set AGENTFY_TEST_REDIS names (as the operator
// user of the deployment's ACL), with a NATS server whose audit stream `agentfy audit
// stream` makes; at the end the trail holds one event per change, whole.
func TestOperatorCommands(t *testing.T) {
	ctx := testenv.Context(t, 2*time.Minute)
	dep := testenv.Deployment(t)
	t.Setenv("AGENTFY_DEPLOYMENT", dep)
	t.Setenv("AGENTFY_JWT_HS256_SECRET", devSecret)
	secrets, err := deploy.GenerateSecrets()
	if err != nil {
		t.Fatal(err)
	}
	topo, err := stacktest.TopologyFromEnv(ctx, dep, secrets)
	if err != nil {
		t.Fatal(err)
	}
	if topo != nil {
		t.Cleanup(topo.Stop)
		for _, kv := range topo.Target.Env(deploy.RedisOperator, secrets.Redis[deploy.RedisOperator], 0) {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
	} else {
		t.Setenv("AGENTFY_REDIS_URL", testenv.Redis(t).URL(4))
	}
	t.Chdir("../..") // the CLI's default paths are relative to the repository root
	ro, err := apiconf.Redis(nil)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := apiconf.Namespace(ro)
	if err != nil {
		t.Fatal(err)
	}
	natsURL, natsSecrets, _ := auditServer(t, ns)
	asRole(t, natsURL, natsSecrets, bus.RoleOperator)
	t.Setenv("AGENTFY_LOG_LEVEL", "error")

	exec := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(ctx, args, &out); err != nil {
			t.Fatalf("agentfy %s: %v", strings.Join(args, " "), err)
		}
		return out.String()
	}
	exec("audit", "stream")

	if out := exec("seed"); !strings.Contains(out, "5 agents") {
		t.Fatalf("seed: %q", out)
	}
	tok := strings.TrimSpace(exec("token", "-user", "u-alice"))
	v, err := auth.NewVerifier(ctx, zerolog.Nop(), auth.JWTConfig{Issuer: "agentfy-dev", Audience: "agentfy-api", HS256Secret: []byte(devSecret)})
	if err != nil {
		t.Fatal(err)
	}
	if sub, err := v.Verify(ctx, tok); err != nil || sub != "u-alice" {
		t.Fatalf("minted token: %q, %v", sub, err)
	}

	key := strings.TrimSpace(exec("orgkey", "-org", "org-acme", "-env", "production"))
	st, err := operator.OpenStores(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer operator.CloseRedis(st.RDB)
	if k, err := st.Creds.VerifyOrgKey(ctx, key); err != nil || !k.HasScope(auth.ScopeWorkerLogsRead) || k.OrgID != "org-acme" {
		t.Fatalf("org key: %+v, %v", k, err)
	}
	noScope := strings.TrimSpace(exec("orgkey", "-org", "org-acme", "-env", "production", "-scope", ""))
	if k, err := st.Creds.VerifyOrgKey(ctx, noScope); err != nil || len(k.Scopes) != 0 {
		t.Fatalf("no-scope key: %+v, %v", k, err)
	}

	var started struct{ SessionID, WorkerPass, BrokerPass string }
	if err := json.Unmarshal([]byte(exec("session", "start", "-agent", "agent-scout")), &started); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Creds.VerifyPass(ctx, started.BrokerPass, auth.RoleBroker); err != nil {
		t.Fatalf("broker pass: %v", err)
	}
	if _, err := st.Creds.VerifyPass(ctx, started.WorkerPass, auth.RoleWorker); err != nil {
		t.Fatalf("worker pass: %v", err)
	}
	exec("session", "stop", "-agent", "agent-scout")
	if _, err := st.Creds.VerifyPass(ctx, started.BrokerPass, auth.RoleBroker); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("broker pass after stop: %v", err)
	}

	// The directory and the keys, one record at a time.
	exec("user", "put", "-id", "u-erin", "-name", "Erin")
	exec("team", "put", "-id", "team-cedar", "-name", "Cedar")
	exec("org", "put", "-id", "org-initech", "-name", "Initech", "-env", "production,staging")
	exec("member", "add", "-team", "team-cedar", "-user", "u-erin")
	if ok, err := st.Dir.IsMember(ctx, "team-cedar", "u-erin"); err != nil || !ok {
		t.Fatalf("member add: %v %v", ok, err)
	}
	exec("agent", "put", "-id", "agent-cedar", "-name", "Cedar", "-team", "team-cedar", "-org", "org-initech", "-env", "staging")
	if out := exec("agent", "put", "-id", "agent-cedar", "-name", "Cedar", "-team", "team-atlas", "-org", "org-initech", "-env", "production"); !strings.Contains(out, `"previousTeam": "team-cedar"`) {
		t.Errorf("agent move: %s", out)
	}
	if a, err := st.Dir.Agent(ctx, "agent-cedar"); err != nil || a.TeamID != "team-atlas" || a.Environment != "production" {
		t.Fatalf("agent put: %+v %v", a, err)
	}
	exec("member", "remove", "-team", "team-cedar", "-user", "u-erin")
	if ok, _ := st.Dir.IsMember(ctx, "team-cedar", "u-erin"); ok {
		t.Fatal("member remove: still a member")
	}
	exec("agent", "delete", "-id", "agent-cedar")
	if _, err := st.Dir.Agent(ctx, "agent-cedar"); !errors.Is(err, directory.ErrNotFound) {
		t.Fatalf("agent delete: %v", err)
	}
	k, _ := st.Creds.VerifyOrgKey(ctx, key)
	list := exec("orgkey", "list", "-org", "org-acme")
	if !strings.Contains(list, k.ID) || strings.Contains(list, key) || strings.Contains(list, strings.Split(key, "_")[2][:16]) {
		t.Errorf("orgkey list: %s", list)
	}
	exec("orgkey", "revoke", "-org", "org-acme", "-id", k.ID)
	if _, err := st.Creds.VerifyOrgKey(ctx, key); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("revoked org key: %v", err)
	}
	var admin struct{ ID, Key string }
	if err := json.Unmarshal([]byte(exec("adminkey", "create", "-name", "sync job")), &admin); err != nil {
		t.Fatal(err)
	}
	if a, err := st.Creds.VerifyAdminKey(ctx, admin.Key); err != nil || a.ID != admin.ID || a.Name != "sync job" {
		t.Fatalf("admin key: %+v %v", a, err)
	}
	exec("adminkey", "revoke", "-id", admin.ID)
	if _, err := st.Creds.VerifyAdminKey(ctx, admin.Key); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("revoked admin key: %v", err)
	}

	// Bad input gets a clear error, and changes nothing.
	for _, args := range [][]string{
		{"session", "start", "-agent", "agent-missing"},
		{"token"},
		{"orgkey", "-org", "org-acme"},
		{"orgkey", "-org", "org-acme", "-env", "mars"},
		{"orgkey", "revoke", "-org", "org-acme", "-id", k.ID},
		{"member", "add", "-team", "team-atlas", "-user", "u-nobody"},
		{"member", "add", "-team", "team-nowhere", "-user", "u-alice"},
		{"agent", "put", "-id", "agent-scout", "-name", "Scout", "-team", "team-nowhere", "-org", "org-acme", "-env", "production"},
		{"agent", "put", "-id", "agent-scout", "-name", "Scout", "-team", "team-atlas", "-org", "org-acme", "-env", "mars"},
		{"adminkey", "create"},
		{"adminkey", "revoke", "-id", admin.ID},
		{"member", "join"},
		{"nonsense"},
	} {
		var out bytes.Buffer
		if err := run(ctx, args, &out); err == nil {
			t.Errorf("agentfy %s succeeded", strings.Join(args, " "))
		}
	}
	if a, err := st.Dir.Agent(ctx, "agent-scout"); err != nil || a.TeamID != "team-atlas" || a.Environment != "production" {
		t.Errorf("a refused agent put changed agent-scout: %+v %v", a, err)
	}

	// One event per change made (none for those refused), each from a publisher of
	// its own, and nothing lost.
	asRole(t, natsURL, natsSecrets, bus.RoleAudit)
	var actions []string
	for _, e := range decodeLines[audit.Admin](t, exec("audit", "admin")) {
		if e.Source != audit.SourceOperatorCLI || e.Replica != "cli" || e.Seq != 1 {
			t.Errorf("event %+v", e)
		}
		actions = append(actions, e.Action)
	}
	want := "directory.seed orgkey.create orgkey.create session.start session.stop user.put team.put org.put member.add agent.put agent.put member.remove agent.delete orgkey.revoke adminkey.create adminkey.revoke"
	if got := strings.Join(actions, " "); got != want {
		t.Errorf("audit admin: %s\nwant %s", got, want)
	}
	if out := exec("audit", "verify"); !strings.Contains(out, "read 16 events (16 decisions) of 16 boots of 1 replica") {
		t.Errorf("audit verify: %s", out)
	}
}

// TestDevCommandsAreElsewhere: the operator CLI links nothing of development, and a
// development command says which binary has it.
func TestDevCommandsAreElsewhere(t *testing.T) {
	for _, c := range devCommands {
		err := run(t.Context(), []string{c}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "go run ./cmd/agentfy-dev "+c) {
			t.Errorf("agentfy %s: %v, want it to name agentfy-dev", c, err)
		}
	}
}
