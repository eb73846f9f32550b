package reliability

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/channel"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/dev/natsserver"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/replica"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

// refusedAtOnce is how fast a refusal by a full bound must come back; a request that
// waited for anything would take seconds.
const refusedAtOnce = time.Second

func TestPendingLimitPerReplica(t *testing.T) {
	observed := ""
	record(t, "Bounds", "128 views wait at replica A; the 129th gets 503 at once (under 1 s)", &observed)
	// 129 agents with sessions whose view requests reach a holder that never answers
	// until released: 128 of them wait at replica A, the 129th is refused at once.
	n := view.MaxInFlight + 1
	seed := directory.Seed{}
	for i := range n {
		seed.Agents = append(seed.Agents, directory.Agent{ID: fmt.Sprintf("agent-p%03d", i), TeamID: "team-atlas", OrgID: "org-acme", Environment: "production"})
	}
	if err := st.Dir.Load(client.Context(t), seed); err != nil {
		t.Fatal(err)
	}
	for _, a := range seed.Agents {
		if _, _, err := st.Sess.Start(client.Context(t), a.ID); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var held []*nats.Msg
	holder, err := st.Bus.Subscribe(st.NS.AllOf(bus.VerbView), func(m *nats.Msg) { mu.Lock(); held = append(held, m); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	_ = holder.SetPendingLimits(-1, -1)
	t.Cleanup(func() { _ = holder.Unsubscribe() })
	if err := st.Bus.Flush(); err != nil {
		t.Fatal(err)
	}
	release := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range held {
			_ = bus.RespondError(st.Bus, m, wire.ReasonCapture, "released by the test")
		}
		held = nil
	}
	t.Cleanup(release)

	member := client.Token(t, "u-alice")
	views := st.Replicas[0].Views
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for _, a := range seed.Agents[:view.MaxInFlight] {
		wg.Go(func() {
			statuses <- client.Do(t, http.MethodGet, client.ViewURL(0, a.ID), member, nil).Status
		})
	}
	deadline := time.Now().Add(20 * time.Second)
	for views.InFlight() < view.MaxInFlight {
		if time.Now().After(deadline) {
			t.Fatalf("only %d pending", views.InFlight())
		}
		time.Sleep(5 * time.Millisecond) // polling the replica's own gauge
	}
	start := time.Now()
	r := client.Do(t, http.MethodGet, client.ViewURL(0, seed.Agents[view.MaxInFlight].ID), member, nil)
	took := time.Since(start)
	observed = fmt.Sprintf("%d pending, the 129th answered %d after %v", views.InFlight(), r.Status, took.Round(time.Millisecond))
	if r.Status != http.StatusServiceUnavailable || took > refusedAtOnce {
		t.Fatalf("129th: %d after %v: %s", r.Status, took, r.Body)
	}
	if views.InFlight() != view.MaxInFlight {
		t.Fatalf("pending = %d after the refusal", views.InFlight())
	}
	release()
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != http.StatusServiceUnavailable {
			t.Fatalf("a held request answered %d, want 503 after the broker refused", s)
		}
	}
}

func TestRelayWaitersPerConnection(t *testing.T) {
	observed := ""
	record(t, "Bounds", "8 views wait on one worker connection; the 9th is refused (busy) at once", &observed)
	agent := client.NewAgent(t, "agent-waiters")
	hb := stack.NewHoldingBroker(16)
	ss := stacktest.StartSession(client.Context(t), t, st, agent, stack.SessionOptions{Replica: 1, BrokerHandler: hb})
	// Each request carries a replica's proof (as a replica's would). The owner relays
	// at most RelayBurst at once and then about one a second, so the eight fill up over
	// a few seconds: a request the pace turns away is sent again, with a new id.
	request := func(c context.Context) error {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		msg, err := st.ViewRequest(ss.ID, hex.EncodeToString(b))
		if err != nil {
			return err
		}
		_, err = bus.RequestMsg(c, st.Bus, msg)
		return err
	}
	paced := func(err error) bool {
		var re *bus.RemoteError
		return errors.As(err, &re) && re.Code == wire.ReasonBusy && strings.Contains(re.Description, "for this session")
	}
	errs := make(chan error, channel.MaxRelayWaiters)
	reqCtx, cancel := context.WithTimeout(client.Context(t), 30*time.Second)
	defer cancel()
	for range channel.MaxRelayWaiters {
		go func() {
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				err := request(reqCtx)
				if !paced(err) {
					errs <- err
					return
				}
				select {
				case <-reqCtx.Done():
					errs <- reqCtx.Err()
					return
				case <-tick.C:
				}
			}
		}()
	}
	for range channel.MaxRelayWaiters {
		select {
		case <-hb.Entered:
		case <-time.After(15 * time.Second):
			t.Fatal("the broker did not receive 8 views")
		}
	}
	start := time.Now()
	err := request(reqCtx)
	var re *bus.RemoteError
	took := time.Since(start)
	observed = fmt.Sprintf("8 held at the broker; the 9th refused after %v (%v)", took.Round(time.Microsecond), err)
	if !errors.As(err, &re) || re.Code != wire.ReasonBusy || !strings.Contains(re.Description, "on this connection") || took > refusedAtOnce {
		t.Fatalf("9th waiter: %v after %v, want busy at once for the connection's waiters", err, took)
	}
	hb.Release()
	for range channel.MaxRelayWaiters {
		if err := <-errs; !errors.As(err, &re) || re.Code != wire.ReasonCapture {
			t.Fatalf("held view ended with %v, want a capture failure", err)
		}
	}
}

func TestOversizedReplyFailsAtOnce(t *testing.T) {
	observed := ""
	record(t, "Bounds", "a reply larger than NATS's max_payload is answered with an error at once (503), not after the 9-s deadline", &observed)
	agent := "agent-oversized"
	liveSession(t, agent, stack.SessionOptions{})
	owner := st.Replicas[1]
	owner.SetHooks(&stack.Hooks{OnEnvelope: func([]byte) []byte { return make([]byte, bus.MaxPayload+1) }})
	t.Cleanup(func() { owner.SetHooks(nil) })
	start := time.Now()
	a := client.Poll(t, agent)
	took := time.Since(start)
	observed = fmt.Sprintf("%s after %v", a.Summary(), took.Round(time.Millisecond))
	if a.Status != http.StatusServiceUnavailable || took > 3*time.Second {
		t.Fatalf("oversized reply: %s", observed)
	}
	owner.SetHooks(nil)
	if a := client.Poll(t, agent); a.Summary() != "200 frame" {
		t.Fatalf("after: %s", a.Summary())
	}
}

func TestReplicaRefusesASmallMaxPayload(t *testing.T) {
	observed := ""
	record(t, "Bounds", "a replica refuses to start on a NATS server whose max_payload cannot carry the largest sealed frame", &observed)
	cfg, err := deploy.NATSConfig(st.NS, st.Secrets)
	if err != nil {
		t.Fatal(err)
	}
	srv := testenv.NATS(t, natsserver.Options{Name: "small-payload", Config: strings.Replace(cfg, "max_payload: 8MB", "max_payload: 1MB", 1)})
	natsCfg := st.NATSConfig(bus.RoleReplica, "small")
	natsCfg.Servers = []string{srv.ClientURL()}
	_, err = replica.New(client.Context(t), replica.Options{ReplicaID: "small", Deployment: "dev", Redis: st.RedisOptions(deploy.RedisReplica), NATS: natsCfg, JWT: []auth.JWTConfig{st.JWTConfig()}, OpenAPI: []byte("x")})
	observed = fmt.Sprint(err)
	if err == nil || !strings.Contains(err.Error(), "max_payload") {
		t.Fatalf("replica on a 1 MB server: %v", err)
	}
}
