package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/dev/stack"
)

// routingResult is one replica count of the routing suite.
type routingResult struct {
	Replicas int `json:"replicas"`
	// Real views through HTTP (requests spread over every replica, the worker on the
	// first), counted by the NATS server.
	Views          int     `json:"views"`
	ViewLatency    dist    `json:"viewLatency"`
	ViewDeliveries float64 `json:"viewDeliveries"` // server OutMsgs per view
	ViewPublished  float64 `json:"viewPublished"`  // server InMsgs per view
	ViewOutBytes   float64 `json:"viewOutBytes"`   // server OutBytes per view
	// Bare captures of the same tab alternated with the views, and view p50 / bare p50:
	// the latency of a view net of the machine's mood at the time.
	BareLatency dist    `json:"bareLatency"`
	ViewRatio   float64 `json:"viewRatio"`
	// The same request and a reply of the same size at the NATS layer, once routed to
	// the owner's subject and once broadcast to every replica.
	Sims               int     `json:"sims"`
	RoutedLatency      dist    `json:"routedLatency"`
	RoutedDeliveries   float64 `json:"routedDeliveries"`
	BroadcastLatency   dist    `json:"broadcastLatency"`
	BroadcastDelivered float64 `json:"broadcastDeliveries"`
}

// natsCounts reads the server's own message counters.
func natsCounts(s *server.Server) (msgsIn, msgsOut, bytesOut int64, err error) {
	v, err := s.Varz(nil)
	if err != nil {
		return 0, 0, 0, err
	}
	return v.InMsgs, v.OutMsgs, v.OutBytes, nil
}

// benchRouting starts a stack of its own with one replica and a session whose worker
// is attached to it, then for 1, 2, 4 and 8 replicas (adding replicas as it goes)
// measures real views and the two routing designs side by side.
func benchRouting(ctx context.Context, o benchOptions, progress func(string, ...any)) (_ []routingResult, replyBytes int, err error) {
	st, err := stack.Start(ctx, stack.Options{Replicas: 1, Deployment: benchDeployment, Chromium: o.chromium, Log: o.log})
	if err != nil {
		return nil, 0, err
	}
	defer st.Close()
	bs, err := startBenchSession(ctx, st, benchAgent, 0, o.chromium, benchPage, o.log)
	if err != nil {
		return nil, 0, err
	}
	defer bs.Close(ctx)
	token, err := st.Token(benchUser, time.Hour)
	if err != nil {
		return nil, 0, err
	}
	v := newViewer(benchUser, token, st)
	// One warm view, and the size of a real sealed reply for the simulations.
	if err := v.openGate(ctx, benchAgent); err != nil {
		return nil, 0, err
	}
	if _, err := v.view(ctx, st.Replicas[0].URL, benchAgent); err != nil {
		return nil, 0, err
	}
	replyBytes = bs.takeHop().captureBody
	if replyBytes == 0 {
		return nil, 0, fmt.Errorf("routing: no sealed reply seen")
	}
	reply := make([]byte, replyBytes)
	_, _ = rand.Read(reply)

	var out []routingResult
	for _, n := range []int{1, 2, 4, 8} {
		for i := len(st.Replicas); i < n; i++ {
			if _, err := st.StartReplica(ctx, i, st.NATS.ClientURL()); err != nil {
				return nil, 0, err
			}
		}
		progress("routing: %d replica(s)", n)
		r, err := benchRoutingAt(ctx, st, bs, v, reply, n, o)
		if err != nil {
			return nil, 0, fmt.Errorf("routing with %d replicas: %w", n, err)
		}
		out = append(out, r)
	}
	return out, replyBytes, nil
}

// benchRoutingAt measures n replicas: real views (benchRoutingViews), then the routed
// and broadcast designs at the NATS layer alone (benchRoutingSims).
func benchRoutingAt(ctx context.Context, st *stack.Stack, bs *benchSession, v *viewer, reply []byte, n int, o benchOptions) (routingResult, error) {
	r := routingResult{Replicas: n, Views: o.routingViews, Sims: o.routingSims}
	if err := benchRoutingViews(ctx, st, bs, v, n, o, &r); err != nil {
		return r, err
	}
	if err := benchRoutingSims(ctx, st, bs, reply, n, o, &r); err != nil {
		return r, err
	}
	return r, nil
}

// benchRoutingViews measures real views, requests spread round robin over the n
// replicas as a balancer would, each followed by a bare capture, and counts the NATS
// server's messages around each view.
func benchRoutingViews(ctx context.Context, st *stack.Stack, bs *benchSession, v *viewer, n int, o benchOptions, r *routingResult) error {
	// Each view also publishes its frame's audit event to the stack's audit stream and
	// waits for the stream's acknowledgement before it answers: the event and its ack
	// are in its own view's delta, and in no other.
	var lat, bare []time.Duration
	var dIn, dOut, dBytes int64
	for i := range o.routingViews {
		if err := v.openGate(ctx, benchAgent); err != nil {
			return err
		}
		if err := idleGap(ctx); err != nil {
			return err
		}
		in0, out0, b0, err := natsCounts(st.NATS)
		if err != nil {
			return err
		}
		t0 := time.Now()
		if _, err := v.view(ctx, st.Replicas[i%n].URL, benchAgent); err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
		in1, out1, b1, err := natsCounts(st.NATS)
		if err != nil {
			return err
		}
		dIn, dOut, dBytes = dIn+in1-in0, dOut+out1-out0, dBytes+b1-b0

		if err := idleGap(ctx); err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		t0 = time.Now()
		_, err = bs.bare.Capture(cctx)
		bare = append(bare, time.Since(t0))
		cancel()
		if err != nil {
			return fmt.Errorf("bare capture: %w", err)
		}
	}
	r.ViewLatency, r.BareLatency = summarize(lat), summarize(bare)
	r.ViewRatio = ratio(r.ViewLatency.P50, r.BareLatency.P50)
	views := float64(o.routingViews)
	r.ViewPublished, r.ViewDeliveries, r.ViewOutBytes = float64(dIn)/views, float64(dOut)/views, float64(dBytes)/views
	return nil
}

// benchRoutingSims measures the NATS layer alone: the owner (the first of n
// connections, one per replica) answers a request id with reply, a reply the size of
// a real sealed frame, asked from the n connections round robin. Routed: only the
// owner subscribes, to a subject of the session. Broadcast: every connection
// subscribes to one subject and drops what is not its own, as every replica would
// with a Redis pub/sub channel. The two alternate in blocks of 20.
//
// Each connection is the sims' own, with the replica's credential, and deliveries are
// the server's count of messages it sent to these connections alone: the server's
// total also counts what the stack does meanwhile (audit acknowledgements, the
// server's own events), which CI once saw add 0.2 a request with 8 replicas.
func benchRoutingSims(ctx context.Context, st *stack.Stack, bs *benchSession, reply []byte, n int, o benchOptions, r *routingResult) error {
	prefix := st.NS.Prefix() + ".bench"
	routedSubj, broadcastSubj := prefix+".routed."+bs.ss.ID, prefix+".broadcast"
	conns := make([]*nats.Conn, 0, n)
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	cids := make([]uint64, 0, n)
	for i := range n {
		nc, err := st.ConnectNATS(bus.RoleReplica, fmt.Sprintf("bench-routing-%d", i))
		if err != nil {
			return err
		}
		conns = append(conns, nc)
		cid, err := nc.GetClientID()
		if err != nil {
			return err
		}
		cids = append(cids, cid)
		held := map[string]bool{}
		if i == 0 {
			held[bs.ss.ID] = true
			if _, err := bus.Subscribe(nc, routedSubj, func(m *nats.Msg) { _ = m.Respond(reply) }); err != nil {
				return err
			}
		}
		sessionID := bs.ss.ID
		if _, err := bus.Subscribe(nc, broadcastSubj, func(m *nats.Msg) {
			if held[sessionID] {
				_ = m.Respond(reply)
			}
		}); err != nil {
			return err
		}
		if err := nc.Flush(); err != nil {
			return err
		}
	}
	delivered := func() (int64, error) {
		var sum int64
		for _, cid := range cids {
			c, err := st.NATS.Connz(&server.ConnzOptions{CID: cid})
			if err != nil {
				return 0, err
			}
			if len(c.Conns) != 1 {
				return 0, fmt.Errorf("routing: connection %d not found on the server", cid)
			}
			sum += c.Conns[0].OutMsgs
		}
		return sum, nil
	}
	const block = 20
	var routedLat, broadcastLat []time.Duration
	var routedOut, broadcastOut int64
	id := make([]byte, 32)
	for done := 0; done < o.routingSims; done += block {
		for _, mode := range []struct {
			subject string
			lat     *[]time.Duration
			out     *int64
		}{{routedSubj, &routedLat, &routedOut}, {broadcastSubj, &broadcastLat, &broadcastOut}} {
			out0, err := delivered()
			if err != nil {
				return err
			}
			for j := range min(block, o.routingSims-done) {
				_, _ = rand.Read(id)
				nc := conns[(done+j)%n]
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				t0 := time.Now()
				_, err := nc.RequestMsgWithContext(rctx, &nats.Msg{Subject: mode.subject, Data: []byte(hex.EncodeToString(id))})
				d := time.Since(t0)
				cancel()
				if err != nil {
					return fmt.Errorf("simulated request on %s: %w", mode.subject, err)
				}
				*mode.lat = append(*mode.lat, d)
			}
			// The server counts a request's copies as it fans it out, before the
			// owner has it to answer: every count is in once the reply is back.
			out1, err := delivered()
			if err != nil {
				return err
			}
			*mode.out += out1 - out0
		}
	}
	sims := float64(o.routingSims)
	r.RoutedLatency, r.RoutedDeliveries = summarize(routedLat), float64(routedOut)/sims
	r.BroadcastLatency, r.BroadcastDelivered = summarize(broadcastLat), float64(broadcastOut)/sims
	return nil
}
