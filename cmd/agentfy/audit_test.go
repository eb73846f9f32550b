package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// TestChangesArePublishedOnTheAuditTrail runs the CLI's changes against a stack and
// reads their events as the audit user does: one per change, on audit.admin.<action>,
// from the operator CLI, with the ids touched and no secret. With NATS unreachable the
// change is made all the same.
func TestChangesArePublishedOnTheAuditTrail(t *testing.T) {
	ctx := testenv.Context(t, 2*time.Minute)
	st, err := stack.Start(ctx, stack.Options{Root: "../..", Log: zerolog.New(os.Stderr).Level(zerolog.WarnLevel)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
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
		if want, _ := st.NS.AuditAdmin(c.action); m.Subject != want {
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

	// NATS unreachable: the change is made, the event lost.
	t.Setenv("AGENTFY_NATS_URL", "nats://127.0.0.1:1")
	if err := run(ctx, []string{"user", "put", "-id", "u-frank", "-name", "Frank"}, &out); err != nil {
		t.Fatalf("a change with NATS unreachable: %v", err)
	}
	if u, err := st.Dir.User(ctx, "u-frank"); err != nil || u.Name != "Frank" {
		t.Fatalf("user after a change with NATS unreachable: %+v %v", u, err)
	}
}
