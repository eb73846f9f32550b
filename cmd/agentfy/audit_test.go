package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// TestChangesArePublishedOnTheAuditTrail runs the CLI's changes against a stack and
// reads their events as the audit user does, live and from the stack's stream (`agentfy
// audit admin`): one per change, on audit.admin.cli.<action>, from the operator CLI,
// with the ids touched and no secret. `agentfy audit stream` accepts the stack's
// stream, which only its size sets apart. With NATS unreachable the change is made all
// the same, and the command says it is not recorded and exits with exitUnrecorded.
func TestChangesArePublishedOnTheAuditTrail(t *testing.T) {
	ctx := testenv.Context(t, 2*time.Minute)
	st := stacktest.Start(t, stack.Options{Root: "../..", Log: zerolog.New(os.Stderr).Level(zerolog.WarnLevel)}).St
	for _, kv := range st.RedisEnv(deploy.RedisOperator) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("AGENTFY_NATS_URL", st.NATS.ClientURL())
	t.Setenv("AGENTFY_NATS_PASSWORD", st.Secrets.NATS[bus.RoleOperator])
	t.Setenv("AGENTFY_DEPLOYMENT", "dev")
	t.Setenv("AGENTFY_LOG_LEVEL", "error")

	reader, err := st.ConnectNATS(bus.RoleAudit, "audit-reader")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.Close)
	sub, err := reader.SubscribeSync(st.NS.AuditAdminWildcard())
	if err != nil {
		t.Fatal(err)
	}
	if err := reader.Flush(); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	for _, c := range []struct {
		args   []string
		action string
		ids    map[string]string
	}{
		{[]string{"user", "put", "-id", "u-erin", "-name", "Erin"}, "user.put", map[string]string{"user": "u-erin"}},
		{[]string{"member", "add", "-team", "team-atlas", "-user", "u-erin"}, "member.add", map[string]string{"team": "team-atlas", "user": "u-erin"}},
		{[]string{"adminkey", "create", "-name", "audit-test"}, "adminkey.create", nil},
	} {
		out.Reset()
		if err := run(ctx, c.args, &out); err != nil {
			t.Fatalf("agentfy %s: %v", strings.Join(c.args, " "), err)
		}
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("%s: no audit event: %v", c.action, err)
		}
		if want, _ := st.NS.AuditAdmin(bus.AuditSourceCLI, c.action); m.Subject != want {
			t.Fatalf("event on %s, want %s", m.Subject, want)
		}
		dec := json.NewDecoder(bytes.NewReader(m.Data))
		dec.DisallowUnknownFields()
		var ev audit.Admin
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("%s event %s: %v", c.action, m.Data, err)
		}
		if c.action == "adminkey.create" {
			var created struct{ ID, Key string }
			if err := json.Unmarshal(out.Bytes(), &created); err != nil || created.Key == "" {
				t.Fatalf("adminkey create printed %q", out.String())
			}
			if strings.Contains(string(m.Data), created.Key) {
				t.Fatalf("the event holds the admin key: %s", m.Data)
			}
			c.ids = map[string]string{"adminKey": created.ID}
		}
		if ev.Source != audit.SourceOperatorCLI || ev.Action != c.action || ev.AdminKey != "" || !maps.Equal(ev.IDs, c.ids) || ev.Time.IsZero() {
			t.Fatalf("%s event %s, want ids %v", c.action, m.Data, c.ids)
		}
	}
	if m, err := sub.NextMsg(100 * time.Millisecond); err == nil {
		t.Fatalf("one event too many: %s %s", m.Subject, m.Data)
	}

	// The stack's stream, as `agentfy audit` reads it.
	if out := mustCLI(t, ctx, "audit", "stream"); !strings.Contains(out, "present, sized by the platform") || !strings.Contains(out, "note: max_bytes") {
		t.Fatalf("audit stream on the stack's: %s", out)
	}
	t.Setenv("AGENTFY_NATS_PASSWORD", st.Secrets.NATS[bus.RoleAudit])
	admin := decodeLines[audit.Admin](t, mustCLI(t, ctx, "audit", "admin"))
	if len(admin) != 3 || admin[0].Action != "user.put" || admin[2].Action != "adminkey.create" || admin[1].Source != audit.SourceOperatorCLI {
		t.Fatalf("audit admin: %+v", admin)
	}
	if out := mustCLI(t, ctx, "audit", "verify"); !strings.Contains(out, "read 3 events (3 decisions) of 3 boots of 1 replica since") {
		t.Fatalf("audit verify: %s", out)
	}

	// NATS unreachable: the change is made, the event lost, and the command says so.
	t.Setenv("AGENTFY_NATS_PASSWORD", st.Secrets.NATS[bus.RoleOperator])
	t.Setenv("AGENTFY_NATS_URL", "nats://127.0.0.1:1")
	out.Reset()
	err = run(ctx, []string{"user", "put", "-id", "u-frank", "-name", "Frank"}, &out)
	if !errors.Is(err, errUnrecorded) || exitCode(err) != exitUnrecorded || !strings.Contains(err.Error(), "user.put") || !strings.Contains(out.String(), "Frank") {
		t.Fatalf("a change with NATS unreachable: %v (exit %d), printed %q", err, exitCode(err), out.String())
	}
	if u, err := st.Dir.User(ctx, "u-frank"); err != nil || u.Name != "Frank" {
		t.Fatalf("user after a change with NATS unreachable: %+v %v", u, err)
	}
}

// TestChangeWithoutStreamIsReported makes a change against a NATS server with JetStream
// but no audit stream: the change is made and printed, the command fails with
// exitUnrecorded naming the action and why, never the event. Once `agentfy audit
// stream` made the stream, the same change is recorded.
func TestChangeWithoutStreamIsReported(t *testing.T) {
	ctx := testenv.Context(t, time.Minute)
	dep := testenv.Deployment(t)
	t.Setenv("AGENTFY_DEPLOYMENT", dep)
	t.Setenv("AGENTFY_LOG_LEVEL", "error")
	rs := testenv.Redis(t)
	t.Setenv("AGENTFY_REDIS_URL", rs.URL(5))
	ns, err := bus.NewNamespace(dep, 5)
	if err != nil {
		t.Fatal(err)
	}
	url, secrets, _ := auditServer(t, ns)
	asRole(t, url, secrets, bus.RoleOperator)
	dir := directory.NewStore(testenv.RedisClient(t, rs, 5), dep)

	out, err := cli(ctx, "user", "put", "-id", "u-erin", "-name", "Erin")
	if !errors.Is(err, errUnrecorded) || exitCode(err) != exitUnrecorded || !strings.Contains(out, `"Erin"`) {
		t.Fatalf("user put without a stream: %v (exit %d), printed %q", err, exitCode(err), out)
	}
	for _, want := range []string{"not recorded in the audit trail", "user.put", "no audit stream AGENTFY_AUDIT"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q: want %q in it", err, want)
		}
	}
	if strings.Contains(err.Error(), "u-erin") {
		t.Errorf("the error shows the event: %q", err)
	}
	if u, err := dir.User(ctx, "u-erin"); err != nil || u.Name != "Erin" {
		t.Fatalf("the change was not made: %+v %v", u, err)
	}

	mustCLI(t, ctx, "audit", "stream")
	mustCLI(t, ctx, "user", "put", "-id", "u-erin", "-name", "Erin Two")
	asRole(t, url, secrets, bus.RoleAudit)
	admin := decodeLines[audit.Admin](t, mustCLI(t, ctx, "audit", "admin"))
	if len(admin) != 1 || admin[0].Action != "user.put" || admin[0].Source != audit.SourceOperatorCLI || admin[0].IDs["user"] != "u-erin" || admin[0].Replica != "cli" {
		t.Fatalf("audit admin: %+v", admin)
	}
}

// TestExitCodes: a change made but not recorded has an exit status of its own, also
// when printing it failed too.
func TestExitCodes(t *testing.T) {
	unrecorded := fmt.Errorf("%w: user.put: nats: timeout", errUnrecorded)
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"done", nil, 0},
		{"help", flag.ErrHelp, 0},
		{"failed", errors.New("redis: down"), 1},
		{"unrecorded", unrecorded, exitUnrecorded},
		{"unrecorded and unprinted", errors.Join(errors.New("write: broken pipe"), unrecorded), exitUnrecorded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitCode(tc.err); got != tc.want {
				t.Fatalf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}
