package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/internal/dev/natsserver"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// natsCluster starts three embedded NATS servers routed to each other on loopback, each
// with the accounts and users of the dev namespace for secrets.
func natsCluster(t *testing.T, secrets deploy.Secrets) []*server.Server {
	t.Helper()
	ns, err := bus.NewNamespace("dev", 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := deploy.NATSConfig(ns, secrets)
	if err != nil {
		t.Fatal(err)
	}
	first := testenv.NATS(t, natsserver.Options{Name: "n1", ClusterName: "agentfy", Config: cfg})
	nodes := []*server.Server{first}
	route := "nats-route://" + first.ClusterAddr().String()
	for _, name := range []string{"n2", "n3"} {
		nodes = append(nodes, testenv.NATS(t, natsserver.Options{Name: name, ClusterName: "agentfy", Routes: []string{route}, Config: cfg}))
	}
	testenv.WaitFor(t, 10*time.Second, "a full mesh of routes", func() bool {
		for _, n := range nodes {
			if n.NumRoutes() < 2 {
				return false
			}
		}
		return true
	})
	return nodes
}

// TestThreeNodeClusterAndReplicaRestart runs two replicas on different nodes of a NATS
// cluster, with the worker on the second: views work, also after the requesting
// replica's node stops, and after the worker's replica restarts (the worker moves on).
func TestThreeNodeClusterAndReplicaRestart(t *testing.T) {
	secrets, err := deploy.GenerateSecrets()
	if err != nil {
		t.Fatal(err)
	}
	nodes := natsCluster(t, secrets)
	c := client.Context(t)
	s2 := stacktest.Start(t, stack.Options{
		NATSServers: []string{nodes[0].ClientURL(), nodes[1].ClientURL(), nodes[2].ClientURL()},
		// A cluster of core NATS servers, without JetStream: the trail best effort.
		AuditBestEffort: true,
		Secrets:         &secrets,
		Log:             zerolog.New(os.Stderr).Level(zerolog.ErrorLevel),
	}).St
	a, b := s2.Replicas[0], s2.Replicas[1]
	if a.NATS.ConnectedServerName() != "n1" || b.NATS.ConnectedServerName() != "n2" {
		t.Fatalf("replicas on %s and %s, want n1 and n2", a.NATS.ConnectedServerName(), b.NATS.ConnectedServerName())
	}
	ss := stacktest.LiveSession(c, t, s2, "agent-scout", stack.SessionOptions{Replica: 1}, "/account.html")
	member, _ := s2.Token("u-alice", time.Hour)
	view := func(t *testing.T, base string) {
		t.Helper()
		if err := s2.OpenGate(c, "agent-scout"); err != nil {
			t.Fatal(err)
		}
		r := client.Get(t, base, stacktest.ViewPath("agent-scout"), member)
		if res := r.Result(t); r.Status != http.StatusOK || res.Page == nil || !strings.HasSuffix(res.Page.URL, "/account.html") {
			t.Fatalf("view through %s: %d %.120s", base, r.Status, r.Body)
		}
	}

	t.Run("across the cluster", func(t *testing.T) { view(t, a.URL) })

	t.Run("after the requesting replica's node stops", func(t *testing.T) {
		nodes[0].Shutdown()
		nodes[0].WaitForShutdown()
		testenv.WaitFor(t, 15*time.Second, "reconnection of replica A", func() bool {
			return a.NATS.IsConnected() && a.NATS.ConnectedServerName() != "n1"
		})
		view(t, a.URL)
	})

	t.Run("after the worker's replica restarts", func(t *testing.T) {
		if err := b.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := ss.WaitAttached(c, a.ID); err != nil {
			t.Fatal(err)
		}
		view(t, a.URL)
		nb, err := s2.StartReplica(c, 1, nodes[2].ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		view(t, nb.URL)
	})

	t.Run("metrics", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(c, http.MethodGet, a.MetricsURL+"/metrics", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		m := string(body)
		for _, want := range []string{
			`agentfy_view_requests_total{outcome="frame",route="/v1/agents/:id/worker/view",status="200"}`,
			"agentfy_view_duration_seconds_bucket", "agentfy_view_pending 0", "agentfy_observation_waiters",
			"agentfy_worker_connections 1", "agentfy_status_listeners", "agentfy_gate_refusals_total",
		} {
			if !strings.Contains(m, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		for _, leak := range []string{"agent-scout", "u-alice", ss.ID, s2.Site} {
			if strings.Contains(m, leak) {
				t.Errorf("/metrics names %q", leak)
			}
		}
	})
}

// TestGracefulShutdownDrainsPendingViews stops replica A while a view it asked for waits
// on a broker: the view still gets its answer, then A exits.
func TestGracefulShutdownDrainsPendingViews(t *testing.T) {
	c := client.Context(t)
	s2 := stacktest.Start(t, stack.Options{Log: zerolog.New(os.Stderr).Level(zerolog.Disabled)}).St
	hb := stack.NewHoldingBroker(1)
	if _, err := s2.StartSession(c, "agent-scout", stack.SessionOptions{Replica: 1, BrokerHandler: hb}); err != nil {
		t.Fatal(err)
	}
	member, _ := s2.Token("u-alice", time.Hour)
	got := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(context.WithoutCancel(c), http.MethodGet, s2.Replicas[0].URL+stacktest.ViewPath("agent-scout"), nil)
		req.Header.Set("Authorization", "Bearer "+member)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- 0
			return
		}
		_ = resp.Body.Close()
		got <- resp.StatusCode
	}()
	<-hb.Entered
	var wg sync.WaitGroup
	stopped := make(chan error, 1)
	wg.Go(func() { stopped <- s2.Replicas[0].Stop() })
	// The replica is draining, not gone: the view is still pending when the broker answers.
	select {
	case err := <-stopped:
		t.Fatalf("replica stopped before its pending view finished: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	hb.Release()
	if status := <-got; status != http.StatusServiceUnavailable {
		t.Fatalf("pending view answered %d during shutdown, want the broker's failure as 503", status)
	}
	wg.Wait()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}
