package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
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
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/wire"
)

// server runs a NATS server with the deployment's roles for ns, and JetStream with a
// platform user (testenv.StartPlatformNATS); it returns the server's URL, the secrets
// and the platform's connection.
func server(t testing.TB, ns bus.Namespace) (string, deploy.Secrets, *nats.Conn) {
	t.Helper()
	p := testenv.StartPlatformNATS(t, ns)
	return p.URL, p.Secrets, p.Platform
}

func connect(t testing.TB, url string, ns bus.Namespace, secrets deploy.Secrets, role bus.Role, o audit.Options) *audit.Publisher {
	t.Helper()
	if o.Source == "" {
		o.Source = audit.SourceAdminAPI
	}
	if o.Replica == "" {
		o.Replica = "replica-a"
	}
	p, err := audit.Connect(bus.Config{Servers: []string{url}, Name: t.Name(), User: role.User(), Password: secrets.NATS[role], InboxPrefix: ns.InboxPrefix(role)}, ns, o, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

func namespace(t testing.TB) bus.Namespace {
	t.Helper()
	ns, err := bus.NewNamespace(testenv.Deployment(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// makeStream makes ns's audit stream as the platform does (audit.Stream), smaller:
// JetStream reserves its whole limit on the disk, and it refuses events once full.
func makeStream(t testing.TB, ctx context.Context, platform *nats.Conn, ns bus.Namespace) jetstream.Stream {
	t.Helper()
	js, err := jetstream.New(platform)
	if err != nil {
		t.Fatal(err)
	}
	cfg := audit.Stream(ns)
	cfg.MaxBytes = 256 << 20
	stream, err := js.CreateStream(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

// stored reads the stream's messages once it holds n.
func stored(t *testing.T, ctx context.Context, stream jetstream.Stream, n uint64) []*jetstream.RawStreamMsg {
	t.Helper()
	testenv.WaitFor(t, 15*time.Second, strconv.FormatUint(n, 10)+" events in the stream", func() bool {
		info, err := stream.Info(ctx)
		return err == nil && info.State.Msgs >= n
	})
	var msgs []*jetstream.RawStreamMsg
	for seq := uint64(1); seq <= n; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// TestEventsReachTheStream publishes views' and an admin change's events and reads them
// back from the audit stream: each on its subject (a decision that read no agent's
// record on the one subject of the rest, an admin change under its source), with
// exactly the struct's members, the trace id of the context's span, time in UTC
// milliseconds, and the publisher's origin: its replica, boot and sequence 1, 2, 3…,
// which is also the message's Nats-Msg-Id.
func TestEventsReachTheStream(t *testing.T) {
	ns := namespace(t)
	url, secrets, platform := server(t, ns)
	ctx := testenv.Context(t, 30*time.Second)
	stream := makeStream(t, ctx, platform, ns)
	p := connect(t, url, ns, secrets, bus.RoleReplica, audit.Options{})

	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	traced := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled}))
	at := time.Date(2026, 12, 5, 7, 30, 1, 123456789, time.FixedZone("MSK", 3*3600))
	p.View(traced, audit.View{Time: at, ViewerKind: audit.ViewerMember, ViewerID: "u-alice", Agent: "agent-scout", Team: "team-atlas",
		Organisation: "org-acme", Session: "s1", Outcome: "unavailable", Reason: "broker_down"})
	// A refusal waits for the end of its second (audit.FoldWindow), a past one's not at
	// all; each is stored before the next is emitted, so that the order is known.
	stored(t, ctx, stream, 1)
	p.Admin(ctx, audit.Admin{Source: audit.SourceOperatorCLI, AdminKey: "0123456789abcdef", Action: "member.add", IDs: map[string]string{"team": "team-atlas", "user": "u-dave"}})
	p.Admin(ctx, audit.Admin{Action: "Not An Action"}) // dropped
	huge := strings.Repeat("u-", audit.MaxEventBytes/2)
	p.Admin(ctx, audit.Admin{Action: "members.set", IDs: map[string]string{"added": huge}}) // dropped
	stored(t, ctx, stream, 2)
	p.View(ctx, audit.View{Time: at, ViewerKind: audit.ViewerPartner, Agent: "not.a/token", Outcome: "not_found"})
	stored(t, ctx, stream, 3)
	p.View(ctx, audit.View{ViewerKind: audit.ViewerMember, Agent: "agent-nobody", Outcome: "unauthenticated"})
	stored(t, ctx, stream, 4)
	if err := p.Frame(ctx, audit.View{ViewerKind: audit.ViewerMember, ViewerID: "u-alice", Agent: "agent-scout", Team: "team-atlas", Organisation: "org-acme", Session: "s1"}); err != nil {
		t.Fatalf("a frame's event: %v", err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Dropped() != 2 || p.Drops(audit.DropInvalid) != 2 {
		t.Fatalf("dropped %d events (%d invalid), want the invalid action's and the oversized one", p.Dropped(), p.Drops(audit.DropInvalid))
	}
	boot := p.Boot()
	if len(boot) != 16 {
		t.Fatalf("boot %q", boot)
	}
	want := []struct{ subject, body string }{
		{ns.AuditView("agent-scout"), `{"time":"2026-12-05T04:30:01.123Z","viewerKind":"member","viewerId":"u-alice","agent":"agent-scout","team":"team-atlas","organisation":"org-acme","session":"s1","outcome":"unavailable","reason":"broker_down","traceId":"4bf92f3577b34da6a3ce929d0e0e4736","replica":"replica-a","boot":"` + boot + `","seq":1,"count":1}`},
		{ns.Prefix() + ".audit.admin.api.member.add", ``},
		{ns.Prefix() + ".audit.view._", ``},
		{ns.Prefix() + ".audit.view._", ``},
		{ns.AuditView("agent-scout"), ``},
	}
	for i, m := range stored(t, ctx, stream, 5) {
		w := want[i]
		if m.Subject != w.subject || (w.body != "" && string(m.Data) != w.body) {
			t.Fatalf("event %d on %s: %s\nwant on %s: %s", i, m.Subject, m.Data, w.subject, w.body)
		}
		if id := m.Header.Get(jetstream.MsgIDHeader); id != boot+"-"+strconv.Itoa(i+1) {
			t.Fatalf("event %d: Nats-Msg-Id %q", i, id)
		}
		dec := json.NewDecoder(bytes.NewReader(m.Data))
		dec.DisallowUnknownFields()
		var o audit.Origin
		switch i {
		case 2, 3:
			var v audit.View
			if err := dec.Decode(&v); err != nil || v.TraceID != "" || v.Time.IsZero() {
				t.Fatalf("event %s: %v", m.Data, err)
			}
			if (i == 2 && (v.Agent != "" || v.Outcome != "not_found")) || (i == 3 && (v.Agent != "agent-nobody" || v.Outcome != "unauthenticated")) {
				t.Fatalf("event %d: %s", i, m.Data)
			}
			o = v.Origin
		case 1:
			var a audit.Admin
			if err := dec.Decode(&a); err != nil || a.Action != "member.add" || a.IDs["user"] != "u-dave" || a.AdminKey != "0123456789abcdef" || a.Source != audit.SourceAdminAPI {
				t.Fatalf("event %s: %v (the source is the publisher's, whatever the caller said)", m.Data, err)
			}
			o = a.Origin
		case 4:
			var v audit.View
			if err := dec.Decode(&v); err != nil || v.Outcome != audit.OutcomeFrame || v.Reason != "" {
				t.Fatalf("event %s: %v", m.Data, err)
			}
			o = v.Origin
		default:
			continue
		}
		if o != (audit.Origin{Replica: "replica-a", Boot: boot, Seq: uint64(i + 1), Count: 1}) {
			t.Fatalf("event %d: origin %+v", i, o)
		}
	}
}

// TestNoFrameUnrecorded: without the stream a frame's event is not acknowledged, so
// Frame says the frame must be discarded, at once and within the budget; the decision
// becomes the 503 audit_unavailable, kept in the buffer under the frame's own sequence
// number, and stored once the stream is back; then frames are recorded again.
func TestNoFrameUnrecorded(t *testing.T) {
	ns := namespace(t)
	url, secrets, platform := server(t, ns)
	ctx := testenv.Context(t, 30*time.Second)
	p := connect(t, url, ns, secrets, bus.RoleReplica, audit.Options{})
	ev := audit.View{ViewerKind: audit.ViewerMember, ViewerID: "u-alice", Agent: "agent-scout", Team: "team-atlas", Organisation: "org-acme", Session: "s1"}
	t0 := time.Now()
	err := p.Frame(ctx, ev)
	if !errors.Is(err, audit.ErrUnavailable) || time.Since(t0) > wire.AuditTimeout+250*time.Millisecond {
		t.Fatalf("a frame with no stream: %v after %v, want ErrUnavailable within %v", err, time.Since(t0), wire.AuditTimeout)
	}
	stream := makeStream(t, ctx, platform, ns)
	if err := p.Frame(ctx, ev); err != nil {
		t.Fatalf("a frame with the stream back: %v", err)
	}
	msgs := stored(t, ctx, stream, 2)
	var outcomes []string
	for _, m := range msgs {
		var v audit.View
		if err := json.Unmarshal(m.Data, &v); err != nil {
			t.Fatal(err)
		}
		outcomes = append(outcomes, fmt.Sprintf("%d %s %s", v.Seq, v.Outcome, v.Reason))
	}
	slices.Sort(outcomes)
	if want := []string{"1 unavailable audit_unavailable", "2 frame "}; !slices.Equal(outcomes, want) {
		t.Fatalf("events %q, want %q", outcomes, want)
	}
}

// TestAFloodFolds: refusals of one second fold into one event of their kind with a
// count — an outsider's 401s of many agent ids into one — while every answer to an
// identified viewer keeps an event of its own (here they wait for a stream that is not
// there yet); once the stream is there, the counts add up to the decisions.
func TestAFloodFolds(t *testing.T) {
	ns := namespace(t)
	url, secrets, platform := server(t, ns)
	ctx := testenv.Context(t, time.Minute)
	p := connect(t, url, ns, secrets, bus.RoleReplica, audit.Options{})
	at := time.Now().Truncate(time.Second)
	const flood, member = 3000, 20
	for i := range flood {
		p.View(ctx, audit.View{Time: at, ViewerKind: audit.ViewerPartner, Agent: "agent-" + strconv.Itoa(i), Outcome: "unauthenticated"})
		if i%(flood/member) == 0 {
			p.View(ctx, audit.View{Time: at, ViewerKind: audit.ViewerMember, ViewerID: "u-alice", Agent: "agent-scout", Team: "team-atlas", Organisation: "org-acme", Session: "s1", Outcome: "no_tab"})
		}
	}
	stream := makeStream(t, ctx, platform, ns)
	var info *jetstream.StreamInfo
	counts := map[string]int{}
	seqs := map[uint64]bool{}
	testenv.WaitFor(t, 30*time.Second, "every decision in the stream", func() bool {
		var err error
		if info, err = stream.Info(ctx); err != nil || info.State.Msgs == 0 {
			return false
		}
		clear(counts)
		clear(seqs)
		for _, m := range stored(t, ctx, stream, info.State.Msgs) {
			var v audit.View
			if err := json.Unmarshal(m.Data, &v); err != nil {
				t.Fatal(err)
			}
			counts[v.Outcome] += v.Count
			seqs[v.Seq] = true
		}
		return counts["unauthenticated"]+counts["no_tab"] >= flood+member
	})
	t.Logf("%d decisions in %d events: %v", flood+member, info.State.Msgs, counts)
	if counts["unauthenticated"] != flood || counts["no_tab"] != member {
		t.Fatalf("counts %v, want %d unauthenticated and %d no_tab", counts, flood, member)
	}
	if info.State.Msgs > member+2+1 { // the first refusal may be out before the rest fold
		t.Fatalf("%d events for %d refusals and %d views: the refusals did not fold", info.State.Msgs, flood, member)
	}
	for seq := uint64(1); seq <= info.State.Msgs; seq++ {
		if !seqs[seq] {
			t.Fatalf("sequence %d missing of %d", seq, info.State.Msgs)
		}
	}
}

// TestOnlyTheAdminAPIPublishesItsEvents: the operator's user cannot publish an event
// under the admin API's subjects, whatever its publisher claims; it can under its own.
func TestOnlyTheAdminAPIPublishesItsEvents(t *testing.T) {
	ns := namespace(t)
	url, secrets, platform := server(t, ns)
	ctx := testenv.Context(t, 30*time.Second)
	stream := makeStream(t, ctx, platform, ns)
	forger := connect(t, url, ns, secrets, bus.RoleOperator, audit.Options{Source: audit.SourceAdminAPI, Replica: "cli"})
	actx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := forger.AdminAcked(actx, audit.Admin{AdminKey: "0123456789abcdef", Action: "adminkey.create"}); err == nil {
		t.Fatal("the operator published an admin API event")
	}
	cli := connect(t, url, ns, secrets, bus.RoleOperator, audit.Options{Source: audit.SourceOperatorCLI, Replica: "cli"})
	if err := cli.AdminAcked(ctx, audit.Admin{Action: "agent.delete", IDs: map[string]string{"agent": "agent-scout"}}); err != nil {
		t.Fatal(err)
	}
	msgs := stored(t, ctx, stream, 1)
	if info, _ := stream.Info(ctx); info.State.Msgs != 1 || msgs[0].Subject != ns.Prefix()+".audit.admin.cli.agent.delete" {
		t.Fatalf("the stream holds %d events, the first on %s", info.State.Msgs, msgs[0].Subject)
	}
}

// TestBestEffortRefusedEventsAreCounted publishes best effort as a role the server does
// not let publish on the audit subjects: every event is refused, and counted.
func TestBestEffortRefusedEventsAreCounted(t *testing.T) {
	ns := namespace(t)
	url, secrets, _ := server(t, ns)
	p := connect(t, url, ns, secrets, bus.RoleDebug, audit.Options{BestEffort: true}) // subscribes only
	ctx := testenv.Context(t, 30*time.Second)
	const n = 5
	for range n {
		if err := p.Frame(ctx, audit.View{ViewerKind: audit.ViewerMember, Agent: "agent-scout"}); err != nil {
			t.Fatalf("best effort, a frame waits for nothing: %v", err)
		}
	}
	testenv.WaitFor(t, 10*time.Second, "the refusals counted", func() bool { return p.Drops(audit.DropRefused) == n })
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
// buffer are dropped and counted — a frame is refused within its budget, and Close
// gives up at its deadline and counts what it left. Durable and best effort alike.
func TestAStalledConnectionDropsWithoutBlocking(t *testing.T) {
	for _, bestEffort := range []bool{false, true} {
		t.Run(map[bool]string{false: "durable", true: "best effort"}[bestEffort], func(t *testing.T) {
			stalled(t, bestEffort)
		})
	}
}

func stalled(t *testing.T, bestEffort bool) {
	ns := namespace(t)
	url, secrets, platform := server(t, ns)
	ctx := testenv.Context(t, time.Minute)
	stream := makeStream(t, ctx, platform, ns)
	proxy := newStallingProxy(t, url[len("nats://"):])
	p := connect(t, proxy.URL(), ns, secrets, bus.RoleReplica, audit.Options{BestEffort: bestEffort})
	ev := audit.View{ViewerKind: audit.ViewerMember, ViewerID: "u-alice", Agent: "agent-scout", Team: "team-atlas", Organisation: "org-acme", Session: "s1", Outcome: "no_tab"}

	p.View(ctx, ev)
	stored(t, ctx, stream, 1)
	proxy.Stall()
	if !bestEffort {
		t0 := time.Now()
		if err := p.Frame(ctx, ev); !errors.Is(err, audit.ErrUnavailable) || time.Since(t0) > wire.AuditTimeout+250*time.Millisecond {
			t.Fatalf("a frame on a stalled connection: %v after %v", err, time.Since(t0))
		}
	}
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
	// The drain waits for the server for each event (durable) or each FlushEvery
	// events (best effort): all but the buffer and a few are dropped at once.
	if d := p.Drops(audit.DropFull); d < n-audit.Buffer-4*audit.FlushEvery {
		t.Fatalf("dropped %d of %d events on a stalled connection", d, n)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	t0 := time.Now()
	err := p.Close(cctx)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > time.Second+audit.WriteTimeout+time.Second {
		t.Fatalf("Close on a stalled connection: %v after %v", err, time.Since(t0))
	}
	// What was queued at Close is counted too: only what reached the socket is not.
	if d := p.Dropped(); d < n-4*audit.FlushEvery {
		t.Fatalf("dropped %d of %d events after Close", d, n)
	}
}
