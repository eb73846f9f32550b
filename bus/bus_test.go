package bus_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

func TestSubject(t *testing.T) {
	ns, err := bus.NewNamespace("prod-eu", 3)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		verb    bus.Verb
		session string
		want    string
		wantErr bool
	}{
		{name: "view", verb: bus.VerbView, session: "0af3", want: "agentfy.prod-eu.db3.view.0af3"},
		{name: "tool", verb: bus.VerbTool, session: "s_1-x", want: "agentfy.prod-eu.db3.tool.s_1-x"},
		{name: "status", verb: bus.VerbStatus, session: "abc", want: "agentfy.prod-eu.db3.status.abc"},
		{name: "unknown verb", verb: "logs", session: "abc", wantErr: true},
		{name: "empty session", verb: bus.VerbView, session: "", wantErr: true},
		{name: "dot in session", verb: bus.VerbView, session: "a.b", wantErr: true},
		{name: "wildcard session", verb: bus.VerbView, session: "*", wantErr: true},
		{name: "full wildcard", verb: bus.VerbView, session: ">", wantErr: true},
		{name: "space", verb: bus.VerbView, session: "a b", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ns.Subject(tt.verb, tt.session)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("Subject = %q, %v; want %q (err %v)", got, err, tt.want, tt.wantErr)
			}
			if err != nil && !errors.Is(err, bus.ErrBadToken) {
				t.Fatalf("err = %v, want ErrBadToken", err)
			}
		})
	}
	if got := ns.Wildcard(); got != "agentfy.prod-eu.db3.>" {
		t.Fatalf("Wildcard = %q", got)
	}
	if got := ns.AllOf(bus.VerbStatus); got != "agentfy.prod-eu.db3.status.*" {
		t.Fatalf("AllOf = %q", got)
	}
	if got := ns.SubjectTemplate(bus.VerbView); got != "agentfy.prod-eu.db3.view.{session}" {
		t.Fatalf("SubjectTemplate = %q", got)
	}
	for _, bad := range []struct {
		dep string
		db  int
	}{{"", 0}, {"Prod", 0}, {"a.b", 0}, {"a*", 0}, {"ok", -1}, {"ok", bus.MaxDB + 1}} {
		if _, err := bus.NewNamespace(bad.dep, bad.db); !errors.Is(err, bus.ErrBadToken) {
			t.Errorf("NewNamespace(%q, %d) = %v", bad.dep, bad.db, err)
		}
	}
	if _, err := (bus.Namespace{}).Subject(bus.VerbView, "abc"); err == nil {
		t.Error("zero namespace built a subject")
	}
}

func TestAuditSubjects(t *testing.T) {
	ns, err := bus.NewNamespace("prod-eu", 3)
	if err != nil {
		t.Fatal(err)
	}
	views := []struct {
		name, agent, want string
	}{
		{name: "agent", agent: "agent-scout", want: "agentfy.prod-eu.db3.audit.view.agent-scout"},
		{name: "empty", agent: "", want: "agentfy.prod-eu.db3.audit.view._"},
		{name: "dot", agent: "a.b", want: "agentfy.prod-eu.db3.audit.view._"},
		{name: "wildcard", agent: ">", want: "agentfy.prod-eu.db3.audit.view._"},
	}
	for _, tt := range views {
		t.Run("view "+tt.name, func(t *testing.T) {
			if got := ns.AuditView(tt.agent); got != tt.want {
				t.Fatalf("AuditView(%q) = %q, want %q", tt.agent, got, tt.want)
			}
		})
	}
	admins := []struct {
		name, action, want string
		wantErr            bool
	}{
		{name: "two words", action: "user.put", want: "agentfy.prod-eu.db3.audit.admin.api.user.put"},
		{name: "underscore", action: "orgkey.create", want: "agentfy.prod-eu.db3.audit.admin.api.orgkey.create"},
		{name: "one word", action: "seed", want: "agentfy.prod-eu.db3.audit.admin.api.seed"},
		{name: "empty", action: "", wantErr: true},
		{name: "wildcard", action: "user.*", wantErr: true},
		{name: "upper case", action: "User.put", wantErr: true},
		{name: "empty token", action: "user..put", wantErr: true},
		{name: "space", action: "user put", wantErr: true},
	}
	for _, tt := range admins {
		t.Run("admin "+tt.name, func(t *testing.T) {
			got, err := ns.AuditAdmin(bus.AuditSourceAPI, tt.action)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("AuditAdmin(%q) = %q, %v; want %q (err %v)", tt.action, got, err, tt.want, tt.wantErr)
			}
			if err != nil && !errors.Is(err, bus.ErrBadToken) {
				t.Fatalf("err = %v, want ErrBadToken", err)
			}
		})
	}
	if got := ns.AuditWildcard(); got != "agentfy.prod-eu.db3.audit.>" {
		t.Fatalf("AuditWildcard = %q", got)
	}
	if got := ns.AuditAdminWildcard(); got != "agentfy.prod-eu.db3.audit.admin.>" {
		t.Fatalf("AuditAdminWildcard = %q", got)
	}
	if got, err := ns.AuditAdmin(bus.AuditSourceCLI, "user.put"); err != nil || got != "agentfy.prod-eu.db3.audit.admin.cli.user.put" {
		t.Fatalf("AuditAdmin(cli, user.put) = %q, %v", got, err)
	}
	if _, err := ns.AuditAdmin("admin-api", "user.put"); !errors.Is(err, bus.ErrBadToken) {
		t.Fatalf("AuditAdmin with a source that is no token: %v", err)
	}
	if p := ns.Permissions(bus.RoleAudit); len(p.Subscribe) != 2 || p.Subscribe[0] != ns.AuditWildcard() || slices.ContainsFunc(p.Publish, func(s string) bool {
		return !strings.HasPrefix(s, "$JS.API.STREAM.INFO.AGENTFY_AUDIT") && !strings.HasPrefix(s, "$JS.API.CONSUMER.")
	}) {
		t.Fatalf("the audit role's permissions: %+v", p)
	}
}

func TestRequestReply(t *testing.T) {
	srv := testenv.NATS(t)
	owner := testenv.NATSConn(t, srv)
	requester := testenv.NATSConn(t, srv)
	ns, _ := bus.NewNamespace("dev", 0)
	viewA, _ := ns.Subject(bus.VerbView, "sessA")
	viewB, _ := ns.Subject(bus.VerbView, "sessB")
	slow, _ := ns.Subject(bus.VerbView, "slow")

	gotA := make(chan string, 4)
	if _, err := bus.Subscribe(owner, viewA, func(m *nats.Msg) {
		gotA <- string(m.Data)
		_ = bus.Respond(owner, m, append([]byte("reply:"), m.Data...))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Subscribe(owner, viewB, func(m *nats.Msg) { _ = bus.RespondError(owner, m, "unsupported", "old worker image") }); err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	if _, err := bus.Subscribe(owner, slow, func(*nats.Msg) { <-hold }); err != nil {
		t.Fatal(err)
	}
	if err := owner.Flush(); err != nil {
		t.Fatal(err)
	}

	ctx := func(d time.Duration) context.Context { return testenv.Context(t, d) }

	data, err := bus.Request(ctx(5*time.Second), requester, viewA, []byte("rid"))
	if err != nil || string(data) != "reply:rid" {
		t.Fatalf("request = %q, %v", data, err)
	}
	if got := <-gotA; got != "rid" {
		t.Fatalf("owner got %q", got)
	}

	_, err = bus.Request(ctx(5*time.Second), requester, viewB, nil)
	var re *bus.RemoteError
	if !errors.As(err, &re) || re.Code != "unsupported" || re.Description != "old worker image" {
		t.Fatalf("error reply: %v", err)
	}

	noOne, _ := ns.Subject(bus.VerbView, "nobody")
	if _, err := bus.Request(ctx(5*time.Second), requester, noOne, nil); !errors.Is(err, bus.ErrNoResponders) {
		t.Fatalf("no responders: %v", err)
	}

	if _, err := bus.Request(ctx(100*time.Millisecond), requester, slow, nil); !errors.Is(err, bus.ErrTimeout) {
		t.Fatalf("timeout: %v", err)
	}

	if _, err := bus.Request(context.Background(), requester, viewA, nil); err == nil {
		t.Fatal("a request without a deadline was sent")
	}
}

// TestCloseIsNoWarning: a connection the process closes itself logs no warning; one the
// server drops does.
func TestCloseIsNoWarning(t *testing.T) {
	srv := testenv.NATS(t)
	var logs testenv.Buffer
	nc, err := bus.Connect(bus.Config{Servers: []string{srv.ClientURL()}, Name: t.Name()}, zerolog.New(&logs).Level(zerolog.DebugLevel))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	testenv.WaitFor(t, 5*time.Second, "the close to be logged", func() bool { return strings.Contains(logs.String(), "nats connection closed") })
	if strings.Contains(logs.String(), `"level":"warn"`) {
		t.Fatalf("a normal close was a warning: %s", logs.String())
	}

	other := testenv.NATS(t)
	nc2, err := bus.Connect(bus.Config{Servers: []string{other.ClientURL()}, Name: t.Name()}, zerolog.New(&logs).Level(zerolog.DebugLevel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc2.Close)
	other.Shutdown()
	testenv.WaitFor(t, 5*time.Second, "a warning for the lost server", func() bool { return strings.Contains(logs.String(), `"message":"nats disconnected"`) })
}
