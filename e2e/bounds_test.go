package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/channel"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/stack"
	"github.com/agentfy/agentfy/view"
)

// refusedAtOnce is how fast a refusal by a full bound must come back; a request that
// waited for anything would take seconds.
const refusedAtOnce = time.Second

func TestPendingLimitPerReplica(t *testing.T) {
	// 129 agents with sessions whose view requests reach a holder that never answers
	// until released: 128 of them wait at replica A, the 129th is refused at once.
	n := view.MaxPending + 1
	seed := directory.Seed{}
	for i := range n {
		seed.Agents = append(seed.Agents, directory.Agent{ID: fmt.Sprintf("agent-p%03d", i), TeamID: "team-atlas", OrgID: "org-acme", Environment: "production"})
	}
	if err := st.Dir.Load(ctx(t), seed); err != nil {
		t.Fatal(err)
	}
	for _, a := range seed.Agents {
		if _, _, err := st.Sess.Start(ctx(t), a.ID); err != nil {
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
			_ = bus.RespondError(m, view.ReasonCapture, "released by the test")
		}
		held = nil
	}
	t.Cleanup(release)

	member := token(t, "u-alice")
	views := st.Replicas[0].Views
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for _, a := range seed.Agents[:view.MaxPending] {
		wg.Go(func() {
			r := get(t, replicaA(), agentPath(a.ID), member)
			statuses <- r.Status
		})
	}
	deadline := time.Now().Add(20 * time.Second)
	for views.Pending() < view.MaxPending {
		if time.Now().After(deadline) {
			t.Fatalf("only %d pending", views.Pending())
		}
		time.Sleep(5 * time.Millisecond) // polling the replica's own gauge
	}
	start := time.Now()
	r := get(t, replicaA(), agentPath(seed.Agents[view.MaxPending].ID), member)
	if took := time.Since(start); r.Status != http.StatusServiceUnavailable || took > refusedAtOnce {
		t.Fatalf("129th: %d after %v: %s", r.Status, took, r.Body)
	}
	if views.Pending() != view.MaxPending {
		t.Fatalf("pending = %d after the refusal", views.Pending())
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

// holdingBroker holds every /observe until released; tools answer nothing useful.
type holdingBroker struct {
	entered chan struct{}
	release chan struct{}
}

func (b *holdingBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/observe" {
		http.Error(w, `{"error":{"code":"not_found","message":"no"}}`, http.StatusNotFound)
		return
	}
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-r.Context().Done():
	}
	http.Error(w, `{"error":{"code":"capture_failed","message":"released"}}`, http.StatusServiceUnavailable)
}

func TestObservationWaitersPerConnection(t *testing.T) {
	agent := newAgent(t, "")
	hb := &holdingBroker{entered: make(chan struct{}, 16), release: make(chan struct{})}
	ss := startSession(t, agent, stack.SessionOptions{BrokerHandler: hb})
	subject, err := st.NS.Subject(bus.VerbView, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	request := func(c context.Context) error {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		_, err := bus.Request(c, st.Bus, subject, []byte(hex.EncodeToString(b)))
		return err
	}
	errs := make(chan error, channel.MaxObservationWaiters)
	reqCtx, cancel := context.WithTimeout(ctx(t), 20*time.Second)
	defer cancel()
	for range channel.MaxObservationWaiters {
		go func() { errs <- request(reqCtx) }()
	}
	for range channel.MaxObservationWaiters {
		select {
		case <-hb.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the broker did not receive 8 observations")
		}
	}
	start := time.Now()
	err = request(reqCtx)
	var re *bus.RemoteError
	if took := time.Since(start); !errors.As(err, &re) || re.Code != view.ReasonBusy || took > refusedAtOnce {
		t.Fatalf("9th waiter: %v after %v, want busy at once", err, took)
	}
	close(hb.release)
	for range channel.MaxObservationWaiters {
		if err := <-errs; !errors.As(err, &re) || re.Code != view.ReasonCapture {
			t.Fatalf("held observation ended with %v, want a capture failure", err)
		}
	}
}
