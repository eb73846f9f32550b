package channel

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/wire"
)

// capCheck is one call of stubCaps.Pending.
type capCheck struct {
	requestID, sessionID string
	budget               time.Duration // time left to the check's deadline when it began
	hasDeadline          bool
}

// stubCaps answers Redeemable as told and records every call. It stands in for
// view.Capabilities (Redis) only where the decision logic is under test; TestHub*
// run the real one.
type stubCaps struct {
	ok    bool
	err   error
	block bool // wait for the check's deadline
	calls chan capCheck
}

func (s *stubCaps) Redeemable(ctx context.Context, requestID, sessionID string) (bool, error) {
	dl, has := ctx.Deadline()
	s.calls <- capCheck{requestID, sessionID, time.Until(dl), has}
	if s.block {
		<-ctx.Done()
		return false, ctx.Err()
	}
	return s.ok, s.err
}

// Refusals of a view request arriving on the bus, decided before anything reaches the
// worker, each answered with its wire reason in the NATS error header. The Conn has no
// socket: any request that got past the refusals would panic writing to it.
func TestOnViewRefusals(t *testing.T) {
	t.Parallel()
	srv := testenv.NATS(t)
	owner := testenv.NATSConn(t, srv)
	requester := testenv.NATSConn(t, srv)

	tests := []struct {
		name      string
		data      string
		caps      *stubCaps
		noBrowser bool        // the hello did not list browserView
		prep      func(*Conn) // bounds already reached
		wantCode  string      // "" for an answer without error
		wantCheck bool        // whether the capability is looked up
		wantCount func(*Hub) int64
	}{
		{name: "ping", data: "", wantCode: ""},
		{name: "bad request id", data: "xyz", wantCode: wire.ReasonBadRequest},
		{name: "uppercase request id", data: strings.ToUpper(testRequestID), wantCode: wire.ReasonBadRequest},
		{name: "request id with a newline", data: testRequestID + "\n", wantCode: wire.ReasonBadRequest},
		{name: "unsupported image", data: testRequestID, noBrowser: true, wantCode: wire.ReasonUnsupported},
		{name: "no capability", data: testRequestID, caps: &stubCaps{ok: false}, wantCode: wire.ReasonRefused, wantCheck: true,
			wantCount: func(h *Hub) int64 { return h.ViewsRefused.Load() }},
		{name: "capability check fails", data: testRequestID, caps: &stubCaps{err: errors.New("redis: connection refused")}, wantCode: wire.ReasonFailed, wantCheck: true},
		{name: "capability check hangs", data: testRequestID, caps: &stubCaps{block: true}, wantCode: wire.ReasonFailed, wantCheck: true},
		{name: "waiters full", data: testRequestID, caps: &stubCaps{ok: true}, wantCode: wire.ReasonBusy, wantCheck: true,
			prep: func(c *Conn) { c.observing.Store(MaxObservationWaiters) }},
		{name: "paced", data: testRequestID, caps: &stubCaps{ok: true}, wantCode: wire.ReasonBusy, wantCheck: true,
			prep:      func(c *Conn) { c.relays = rate.NewLimiter(ObservationRate, 0) },
			wantCount: func(h *Hub) int64 { return h.ViewsPaced.Load() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			caps := tt.caps
			if caps == nil {
				caps = &stubCaps{ok: true}
			}
			caps.calls = make(chan capCheck, 4)
			ns, err := bus.NewNamespace(testenv.Deployment(t), 0)
			if err != nil {
				t.Fatal(err)
			}
			h := NewHub(Config{ReplicaID: "r1", Grants: caps, NATS: owner, Namespace: ns, Log: testenv.Logger(t)})
			hello := session.Hello{ImageTag: "w:1", BootstrapRevision: wire.BootstrapRevision, Capabilities: []string{wire.CapabilityBrowserView}}
			if tt.noBrowser {
				hello.Capabilities = []string{"somethingElse"}
			}
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			c := &Conn{hub: h, session: session.Session{ID: "s1", Hello: hello}, ctx: ctx, cancel: cancel, log: testenv.Logger(t), relays: rate.NewLimiter(ObservationRate, ObservationBurst)}
			observing := int32(0)
			if tt.prep != nil {
				tt.prep(c)
				observing = c.observing.Load()
			}
			subject, err := ns.Subject(bus.VerbView, "s1")
			if err != nil {
				t.Fatal(err)
			}
			sub, err := bus.Subscribe(owner, subject, c.onView)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sub.Unsubscribe() })
			if err := owner.Flush(); err != nil {
				t.Fatal(err)
			}

			rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer rcancel()
			start := time.Now()
			reply, err := bus.Request(rctx, requester, subject, []byte(tt.data))
			took := time.Since(start)
			var re *bus.RemoteError
			switch {
			case tt.wantCode == "" && err != nil:
				t.Fatalf("request = %v, want an answer", err)
			case tt.wantCode == "" && len(reply) != 0:
				t.Fatalf("ping answered %q, want empty", reply)
			case tt.wantCode != "" && (!errors.As(err, &re) || re.Code != tt.wantCode):
				t.Fatalf("request = %v, want remote error %q", err, tt.wantCode)
			}
			if re != nil && (strings.Contains(re.Description, "redis") || strings.Contains(re.Description, tt.data) && tt.data != "") {
				t.Errorf("description %q says more than the rule broken", re.Description)
			}

			select {
			case got := <-caps.calls:
				if !tt.wantCheck {
					t.Fatalf("capability looked up (%+v), want a refusal before", got)
				}
				if got.requestID != tt.data || got.sessionID != "s1" {
					t.Errorf("capability check of %q for %q, want %q for s1", got.requestID, got.sessionID, tt.data)
				}
				if !got.hasDeadline || got.budget > wire.OwnerCheckTimeout {
					t.Errorf("capability check had %v (deadline %v), want at most %v", got.budget, got.hasDeadline, wire.OwnerCheckTimeout)
				}
			default:
				if tt.wantCheck {
					t.Fatal("capability not looked up")
				}
			}
			if tt.caps != nil && tt.caps.block && took > wire.OwnerCheckTimeout+wire.HopMargin {
				t.Errorf("a hanging check was answered after %v, want within %v", took, wire.OwnerCheckTimeout+wire.HopMargin)
			}
			if got := c.observing.Load(); got != observing {
				t.Errorf("%d observation waiters after a refusal, want %d", got, observing)
			}
			if tt.wantCount != nil && tt.wantCount(h) != 1 {
				t.Errorf("counter = %d, want 1", tt.wantCount(h))
			}
			if n := h.ViewsRelayed.Load(); n != 0 {
				t.Errorf("ViewsRelayed = %d, want 0", n)
			}
		})
	}
}
