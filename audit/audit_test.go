package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/internal/dev/natsserver"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// server runs a NATS server with the deployment's roles for ns, and JetStream with a
// platform user; it returns the server's URL and the secrets.
func server(t *testing.T, ns bus.Namespace) (string, deploy.Secrets, *nats.Conn) {
	t.Helper()
	secrets, err := deploy.GenerateSecrets()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := deploy.NATSConfig(ns, secrets)
	if err != nil {
		t.Fatal(err)
	}
	js := &natsserver.JetStream{StoreDir: t.TempDir(), Account: deploy.NATSAccount, User: "platform", Password: "platform-password"}
	s := testenv.NATS(t, natsserver.Options{Config: cfg, JetStream: js})
	platform, err := bus.Connect(bus.Config{Servers: []string{s.ClientURL()}, User: js.User, Password: js.Password}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(platform.Close)
	return s.ClientURL(), secrets, platform
}

func connect(t *testing.T, url string, ns bus.Namespace, secrets deploy.Secrets, role bus.Role) *audit.Publisher {
	t.Helper()
	p, err := audit.Connect(bus.Config{Servers: []string{url}, Name: t.Name(), User: role.User(), Password: secrets.NATS[role], InboxPrefix: ns.InboxPrefix(role)}, ns, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

func namespace(t *testing.T) bus.Namespace {
	t.Helper()
	ns, err := bus.NewNamespace(testenv.Deployment(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// TestEventsReachTheStream publishes a view's and an admin change's event and reads them
// back from a JetStream stream over agentfy.*.*.audit.>: each on its subject, with
// exactly the struct's members, the trace id of the context's span, and time in UTC
// milliseconds.
func TestEventsReachTheStream(t *testing.T) {
	ns := namespace(t)
	url, secrets, platform := server(t, ns)
	ctx := testenv.Context(t, 30*time.Second)
	js, err := jetstream.New(platform)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "AUDIT", Subjects: []string{bus.AuditStreamSubjects}, Storage: jetstream.FileStorage, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p := connect(t, url, ns, secrets, bus.RoleReplica)

	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	traced := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled}))
	at := time.Date(2026, 12, 5, 7, 30, 1, 123456789, time.FixedZone("MSK", 3*3600))
	p.View(traced, audit.View{Time: at, ViewerKind: audit.ViewerMember, ViewerID: "u-alice", Agent: "agent-scout", Team: "team-atlas",
		Organisation: "org-acme", Session: "s1", Outcome: "unavailable", Reason: "broker_down"})
	p.View(ctx, audit.View{ViewerKind: audit.ViewerPartner, Agent: "not.a/token", Outcome: "not_found"})
	p.Admin(ctx, audit.Admin{Source: audit.SourceAdminAPI, AdminKey: "0123456789abcdef", Action: "member.add", IDs: map[string]string{"team": "team-atlas", "user": "u-dave"}})
	p.Admin(ctx, audit.Admin{Source: audit.SourceAdminAPI, Action: "Not An Action"}) // dropped
	huge := strings.Repeat("u-", audit.MaxEventBytes/2)
	p.Admin(ctx, audit.Admin{Source: audit.SourceAdminAPI, Action: "members.set", IDs: map[string]string{"added": huge}}) // dropped
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Dropped() != 2 {
		t.Fatalf("dropped %d events, want the invalid action's and the oversized one", p.Dropped())
	}
	want := []struct{ subject, body string }{
		{ns.AuditView("agent-scout"), `{"time":"2026-12-05T04:30:01.123Z","viewerKind":"member","viewerId":"u-alice","agent":"agent-scout","team":"team-atlas","organisation":"org-acme","session":"s1","outcome":"unavailable","reason":"broker_down","traceId":"4bf92f3577b34da6a3ce929d0e0e4736"}`},
		{ns.Prefix() + ".audit.view._", ``},
		{ns.Prefix() + ".audit.admin.member.add", ``},
	}
	testenv.WaitFor(t, 10*time.Second, "three events in the stream", func() bool {
		info, err := stream.Info(ctx)
		return err == nil && info.State.Msgs == 3
	})
	for i, w := range want {
		m, err := stream.GetMsg(ctx, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != w.subject || (w.body != "" && string(m.Data) != w.body) {
			t.Fatalf("event %d on %s: %s\nwant on %s: %s", i, m.Subject, m.Data, w.subject, w.body)
		}
		dec := json.NewDecoder(bytes.NewReader(m.Data))
		dec.DisallowUnknownFields()
		switch i {
		case 1:
			var v audit.View
			if err := dec.Decode(&v); err != nil || v.Agent != "" || v.TraceID != "" || v.Outcome != "not_found" || v.Time.IsZero() {
				t.Fatalf("event %s: %v", m.Data, err)
			}
		case 2:
			var a audit.Admin
			if err := dec.Decode(&a); err != nil || a.Action != "member.add" || a.IDs["user"] != "u-dave" || a.AdminKey != "0123456789abcdef" {
				t.Fatalf("event %s: %v", m.Data, err)
			}
		}
	}
}

// TestRefusedEventsAreCounted publishes as a role the server does not let publish on
// the audit subjects: every event is refused, and counted.
func TestRefusedEventsAreCounted(t *testing.T) {
	ns := namespace(t)
	url, secrets, _ := server(t, ns)
	p := connect(t, url, ns, secrets, bus.RoleDebug) // subscribes only
	ctx := testenv.Context(t, 30*time.Second)
	const n = 5
	for range n {
		p.View(ctx, audit.View{ViewerKind: audit.ViewerMember, Agent: "agent-scout", Outcome: "frame"})
	}
	testenv.WaitFor(t, 10*time.Second, "the refusals counted", func() bool { return p.Dropped() == n })
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// stallingProxy forwards TCP to target until stall is closed; from then on it reads
// nothing more from its clients, so their writes fill the socket buffers and their
// server never hears them: a NATS connection that hangs.
type stallingProxy struct {
	ln     net.Listener
	target string
	stall  chan struct{}
	once   sync.Once
}

func newStallingProxy(t *testing.T, target string) *stallingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallingProxy{ln: ln, target: target, stall: make(chan struct{})}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			go func() { _, _ = io.Copy(c, s) }()
			go func() {
				defer func() { _ = c.Close(); _ = s.Close() }()
				buf := make([]byte, 32<<10)
				for {
					select {
					case <-p.stall:
						<-done
						return
					default:
					}
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					select {
					case <-p.stall:
						<-done
						return
					default:
					}
					if _, err := s.Write(buf[:n]); err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

func (p *stallingProxy) URL() string { return "nats://" + p.ln.Addr().String() }
func (p *stallingProxy) Stall()      { p.once.Do(func() { close(p.stall) }) }

// TestAStalledConnectionDropsWithoutBlocking: once the connection stops moving, views
// keep emitting at full speed — every call returns at once, the events beyond the
// buffer are dropped and counted — and Close gives up at its deadline.
func TestAStalledConnectionDropsWithoutBlocking(t *testing.T) {
	ns := namespace(t)
	url, secrets, platform := server(t, ns)
	sub, err := platform.SubscribeSync(ns.AuditWildcard())
	if err != nil {
		t.Fatal(err)
	}
	if err := platform.Flush(); err != nil {
		t.Fatal(err)
	}
	proxy := newStallingProxy(t, url[len("nats://"):])
	p := connect(t, proxy.URL(), ns, secrets, bus.RoleReplica)
	ctx := testenv.Context(t, time.Minute)
	ev := audit.View{ViewerKind: audit.ViewerMember, ViewerID: "u-alice", Agent: "agent-scout", Team: "team-atlas", Organisation: "org-acme", Session: "s1", Outcome: "frame"}

	p.View(ctx, ev)
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("an event before the stall: %v", err)
	}
	proxy.Stall()
	const n = 20000
	var slowest time.Duration
	start := time.Now()
	for range n {
		t0 := time.Now()
		p.View(ctx, ev)
		slowest = max(slowest, time.Since(t0))
	}
	took := time.Since(start)
	t.Logf("%d events in %v (slowest %v) on a stalled connection: %d dropped", n, took, slowest, p.Dropped())
	if slowest > 250*time.Millisecond {
		t.Fatalf("an event took %v to emit on a stalled connection", slowest)
	}
	// The drain waits FlushTimeout for each FlushEvery events the server does not
	// confirm: all but the buffer and a few of those are dropped at once.
	if d := p.Dropped(); d < n-audit.Buffer-4*audit.FlushEvery {
		t.Fatalf("dropped %d of %d events on a stalled connection", d, n)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	t0 := time.Now()
	err = p.Close(cctx)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > time.Second+audit.WriteTimeout+time.Second {
		t.Fatalf("Close on a stalled connection: %v after %v", err, time.Since(t0))
	}
	// What was queued at Close is counted too: only what reached the socket is not.
	if d := p.Dropped(); d < n-4*audit.FlushEvery {
		t.Fatalf("dropped %d of %d events after Close", d, n)
	}
}
