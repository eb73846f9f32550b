package channel

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/time/rate"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/wire"
)

// capCheck is one call of stubFeatures.Vouched.
type capCheck struct{ requestID, sessionID, proof string }

// stubFeatures answers Vouched as told and records every call. It stands in for
// view.Grants only where the decision logic is under test; TestHub* run the real one.
type stubFeatures struct {
	ok    bool
	calls chan capCheck
}

func (s *stubFeatures) Vouched(requestID, sessionID, proof string, _ time.Time) bool {
	s.calls <- capCheck{requestID, sessionID, proof}
	return s.ok
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
		features  *stubFeatures
		noBrowser bool        // the hello did not list browserView
		prep      func(*Conn) // bounds already reached
		wantCode  string      // "" for an answer without error
		wantCheck bool        // whether the request's proof is checked
		wantCount func(*Hub) int64
	}{
		{name: "ping", data: "", wantCode: ""},
		{name: "bad request id", data: "xyz", wantCode: wire.ReasonBadRequest},
		{name: "uppercase request id", data: strings.ToUpper(testRequestID), wantCode: wire.ReasonBadRequest},
		{name: "request id with a newline", data: testRequestID + "\n", wantCode: wire.ReasonBadRequest},
		{name: "unsupported image", data: testRequestID, noBrowser: true, wantCode: wire.ReasonUnsupported},
		{name: "no proof of a replica", data: testRequestID, features: &stubFeatures{ok: false}, wantCode: wire.ReasonRefused, wantCheck: true,
			wantCount: func(h *Hub) int64 { return h.ViewsRefused.Load() }},
		{name: "waiters full", data: testRequestID, features: &stubFeatures{ok: true}, wantCode: wire.ReasonBusy, wantCheck: true,
			prep: func(c *Conn) { c.relaying.Store(MaxRelayWaiters) }},
		{name: "paced", data: testRequestID, features: &stubFeatures{ok: true}, wantCode: wire.ReasonBusy, wantCheck: true,
			prep:      func(c *Conn) { c.relays = rate.NewLimiter(RelayRate, 0) },
			wantCount: func(h *Hub) int64 { return h.ViewsPaced.Load() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			features := tt.features
			if features == nil {
				features = &stubFeatures{ok: true}
			}
			features.calls = make(chan capCheck, 4)
			ns, err := bus.NewNamespace(testenv.Deployment(t), 0)
			if err != nil {
				t.Fatal(err)
			}
			h := NewHub(Config{ReplicaID: "r1", Grants: features, NATS: owner, Namespace: ns, Log: testenv.Logger(t)})
			hello := session.Hello{ImageTag: "w:1", BootstrapRevision: wire.BootstrapRevision, Features: []string{wire.FeatureBrowserView}}
			if tt.noBrowser {
				hello.Features = []string{"somethingElse"}
			}
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			c := &Conn{hub: h, session: session.Session{ID: "s1", Hello: hello}, ctx: ctx, cancel: cancel, log: testenv.Logger(t), relays: rate.NewLimiter(RelayRate, RelayBurst)}
			relaying := int32(0)
			if tt.prep != nil {
				tt.prep(c)
				relaying = c.relaying.Load()
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
			reply, err := bus.RequestMsg(rctx, requester, &nats.Msg{Subject: subject, Data: []byte(tt.data), Header: nats.Header{bus.HeaderProof: {"the proof"}}})
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
			case got := <-features.calls:
				if !tt.wantCheck {
					t.Fatalf("proof checked (%+v), want a refusal before", got)
				}
				if got.requestID != tt.data || got.sessionID != "s1" || got.proof != "the proof" {
					t.Errorf("proof check %+v, want %q for s1 with the request's header", got, tt.data)
				}
			default:
				if tt.wantCheck {
					t.Fatal("proof not checked")
				}
			}
			if got := c.relaying.Load(); got != relaying {
				t.Errorf("%d relay waiters after a refusal, want %d", got, relaying)
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
