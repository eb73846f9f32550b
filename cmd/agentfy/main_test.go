package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/internal/stack"
	"github.com/agentfy/agentfy/internal/testenv"
)

const devSecret = "test-secret-test-secret-test-secret!"

// TestOperatorCommands runs seed, token, orgkey and session start|stop against a
// redis-server, or the Cluster or Sentinel set AGENTFY_TEST_REDIS names (as the operator
// user of the deployment's ACL).
func TestOperatorCommands(t *testing.T) {
	ctx := testenv.Context(t, 2*time.Minute)
	dep := testenv.Deployment(t)
	t.Setenv("AGENTFY_DEPLOYMENT", dep)
	t.Setenv("AGENTFY_JWT_HS256_SECRET", devSecret)
	secrets, err := deploy.GenerateSecrets()
	if err != nil {
		t.Fatal(err)
	}
	topo, err := stack.TopologyFromEnv(ctx, dep, secrets)
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

	exec := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(ctx, args, &out); err != nil {
			t.Fatalf("agentfy %s: %v", strings.Join(args, " "), err)
		}
		return out.String()
	}

	if out := exec("seed"); !strings.Contains(out, "5 agents") {
		t.Fatalf("seed: %q", out)
	}
	tok := strings.TrimSpace(exec("token", "-user", "u-alice"))
	v, err := auth.NewVerifier(auth.JWTConfig{Issuer: "agentfy-dev", Audience: "agentfy-api", HS256Secret: []byte(devSecret)})
	if err != nil {
		t.Fatal(err)
	}
	if sub, err := v.Verify(tok); err != nil || sub != "u-alice" {
		t.Fatalf("minted token: %q, %v", sub, err)
	}

	key := strings.TrimSpace(exec("orgkey", "-org", "org-acme", "-env", "production"))
	st, err := openStores(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer closeRedis(st.rdb)
	if k, err := st.creds.VerifyOrgKey(ctx, key); err != nil || !k.HasScope(auth.ScopeWorkerLogsRead) || k.OrgID != "org-acme" {
		t.Fatalf("org key: %+v, %v", k, err)
	}
	noScope := strings.TrimSpace(exec("orgkey", "-org", "org-acme", "-env", "production", "-scope", ""))
	if k, err := st.creds.VerifyOrgKey(ctx, noScope); err != nil || len(k.Scopes) != 0 {
		t.Fatalf("no-scope key: %+v, %v", k, err)
	}

	var started struct{ SessionID, WorkerPass, BrokerPass string }
	if err := json.Unmarshal([]byte(exec("session", "start", "-agent", "agent-scout")), &started); err != nil {
		t.Fatal(err)
	}
	if _, err := st.creds.VerifyPass(ctx, started.BrokerPass, auth.RoleBroker); err != nil {
		t.Fatalf("broker pass: %v", err)
	}
	if _, err := st.creds.VerifyPass(ctx, started.WorkerPass, auth.RoleWorker); err != nil {
		t.Fatalf("worker pass: %v", err)
	}
	exec("session", "stop", "-agent", "agent-scout")
	if _, err := st.creds.VerifyPass(ctx, started.BrokerPass, auth.RoleBroker); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("broker pass after stop: %v", err)
	}

	// Bad input gets a clear error.
	for _, args := range [][]string{
		{"session", "start", "-agent", "agent-missing"},
		{"token"},
		{"orgkey", "-org", "org-acme"},
		{"nonsense"},
	} {
		var out bytes.Buffer
		if err := run(ctx, args, &out); err == nil {
			t.Errorf("agentfy %s succeeded", strings.Join(args, " "))
		}
	}
}
