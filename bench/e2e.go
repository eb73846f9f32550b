package bench

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/dev/stack"
)

// e2eResult is the end-to-end view against the bare capture on the same tab.
type e2eResult struct {
	Pairs int  `json:"pairs"`
	View  dist `json:"view"`  // HTTP request at replica A → decoded frame
	Spied dist `json:"spied"` // the same, for the views timed per hop
	Bare  dist `json:"bare"`  // the bare CDP capture sequence
	InCap dist `json:"inCap"` // the broker's own capture inside each view (OnCapture)
	// Ratios of the view to the bare capture at p50, p95 and p99.
	RatioP50 float64 `json:"ratioP50"`
	RatioP95 float64 `json:"ratioP95"`
	RatioP99 float64 `json:"ratioP99"`
	// Overhead is the per-view difference: view − the broker's capture inside it.
	Overhead dist  `json:"overhead"`
	Hops     []hop `json:"hops"`
	// Sizes of each view, medians: the JPEG, the sealed /observe body, the HTTP body.
	JPEGBytes   int `json:"jpegBytes"`
	SealedBytes int `json:"sealedBytes"`
	BodyBytes   int `json:"bodyBytes"`
	Width       int `json:"width"`
}

// hop is one leg of a view, timed from outside the code it measures.
type hop struct {
	Name  string `json:"name"`
	What  string `json:"what"`
	Dist  dist   `json:"dist"`
	Share float64
}

// natsSpy records when the NATS server delivered a message on a subject to a silent
// subscriber of the harness (NATS delivers a plain subject to every subscriber; only
// the owner replies). Messages of fewer than minBytes are ignored. It subscribes only
// around the views it times, so that the other views run undisturbed.
type natsSpy struct {
	nc       *nats.Conn
	subject  string
	minBytes int

	mu   sync.Mutex
	seen time.Time // guarded by mu
	sub  *nats.Subscription
}

// start subscribes and waits until the server has the interest.
func (s *natsSpy) start() error {
	s.mu.Lock()
	s.seen = time.Time{}
	s.mu.Unlock()
	var err error
	if s.sub, err = s.nc.Subscribe(s.subject, func(m *nats.Msg) {
		now := time.Now()
		if len(m.Data) < s.minBytes {
			return
		}
		s.mu.Lock()
		s.seen = now
		s.mu.Unlock()
	}); err != nil {
		return err
	}
	_ = s.sub.SetPendingLimits(-1, -1)
	return s.nc.Flush()
}

// stop unsubscribes, waits until the server has dropped the interest, and returns the
// time of the last delivery.
func (s *natsSpy) stop() (time.Time, error) {
	if s.sub == nil {
		return time.Time{}, nil
	}
	err := s.sub.Unsubscribe()
	s.sub = nil
	if err == nil {
		err = s.nc.Flush()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen, err
}

// benchE2E runs warm+pairs pairs of one view of agentID through replica a (the worker
// is attached to another replica) and one bare capture of the same tab, each after a
// random idle gap; the order flips every pair. Every other two pairs, the view is also
// timed per hop with two NATS spies (which cost the server one more delivery of the
// sealed reply); the headline numbers come from the other views. The first warm pairs
// are not counted.
func benchE2E(ctx context.Context, st *stack.Stack, bs *benchSession, v *viewer, a *stack.Replica, agentID string, warm, pairs int) (e2eResult, error) {
	subject, err := st.NS.Subject(bus.VerbView, bs.ss.ID)
	if err != nil {
		return e2eResult{}, err
	}
	// When the request reached NATS, and when the sealed reply did (every reply inbox;
	// only a view's reply is this large while the suite runs).
	reqSpy := &natsSpy{nc: st.Bus, subject: subject}
	replySpy := &natsSpy{nc: st.Bus, subject: st.NS.InboxPrefix(bus.RoleReplica) + ".>", minBytes: 1 << 10}

	s := &e2eSamples{legs: make([][]time.Duration, 8)}

	doView := func(count, instrument bool) error {
		if err := v.openGate(ctx, agentID); err != nil {
			return err
		}
		if instrument {
			if err := reqSpy.start(); err != nil {
				return err
			}
			if err := replySpy.start(); err != nil {
				return err
			}
		}
		bs.takeHop()
		if err := idleGap(ctx); err != nil {
			return err
		}
		t0 := time.Now()
		f, err := v.view(ctx, a.URL, agentID)
		t1 := time.Now()
		if err != nil {
			return err
		}
		h := bs.takeHop()
		seen, err := reqSpy.stop()
		if err != nil {
			return err
		}
		replied, err := replySpy.stop()
		if err != nil {
			return err
		}
		if count {
			s.addView(f, h, t0, t1, seen, replied, instrument)
		}
		return nil
	}
	doBare := func(count bool) error {
		d, err := bs.bare.timed(ctx)
		if err != nil {
			return err
		}
		if count {
			s.bares = append(s.bares, d)
		}
		return nil
	}
	for i := range warm + pairs {
		count, instrument := i >= warm, (i/2)%2 == 1
		if err := alternate(i, func() error { return doView(count, instrument) }, func() error { return doBare(count) }); err != nil {
			return e2eResult{}, err
		}
	}

	return s.result(pairs), nil
}

// e2eSamples is what benchE2E collects from the pairs it counts.
type e2eSamples struct {
	views, spied, bares, inCaptures, overheads []time.Duration
	legs                                       [][]time.Duration // per hop, of the views timed per hop
	jpegs, sealed, bodies                      []int
	width                                      int
}

// addView records a counted view, asked at t0 and decoded at t1, with what the hooks
// saw of it (h) and, when it was timed per hop, when the spies saw its request (seen)
// and its sealed reply (replied). Those views count on their own row, and their hops
// only when every hook saw its part in order.
func (s *e2eSamples) addView(f frame, h hopSample, t0, t1, seen, replied time.Time, instrument bool) {
	total := t1.Sub(t0)
	s.jpegs, s.sealed, s.bodies, s.width = append(s.jpegs, len(f.jpeg)), append(s.sealed, h.captureBody), append(s.bodies, f.bodyBytes), f.width
	if !instrument {
		s.views = append(s.views, total)
		s.inCaptures = append(s.inCaptures, h.capture)
		s.overheads = append(s.overheads, total-h.capture)
		return
	}
	s.spied = append(s.spied, total)
	if seen.IsZero() || replied.IsZero() || h.captureStart.IsZero() ||
		seen.After(h.captureStart) || replied.Before(h.captureEnd) || f.headers.Before(replied) {
		return // a hop the hooks missed: the total still counts
	}
	atBroker := h.captureEnd.Sub(h.captureStart)
	for i, d := range []time.Duration{
		seen.Sub(t0),                     // replica A up to the NATS request
		h.captureStart.Sub(seen),         // NATS → replica B → worker → broker
		h.consume,                        // the broker's consume call
		h.capture,                        // the broker's CDP capture
		atBroker - h.consume - h.capture, // the broker's seal and JSON
		replied.Sub(h.captureEnd),        // broker → worker → B → NATS
		f.headers.Sub(replied),           // replica A after the reply
		t1.Sub(f.headers),                // the viewer reads and decodes
	} {
		s.legs[i] = append(s.legs[i], d)
	}
}

// result summarises the samples of pairs counted pairs: the views against the bare
// captures, and each hop's share of the p50 of the views timed per hop.
func (s *e2eSamples) result(pairs int) e2eResult {
	r := e2eResult{
		Pairs: pairs, View: summarize(s.views), Spied: summarize(s.spied), Bare: summarize(s.bares), InCap: summarize(s.inCaptures), Overhead: summarize(s.overheads),
		JPEGBytes: medianInt(s.jpegs), SealedBytes: medianInt(s.sealed), BodyBytes: medianInt(s.bodies), Width: s.width,
	}
	r.RatioP50, r.RatioP95, r.RatioP99 = ratio(r.View.P50, r.Bare.P50), ratio(r.View.P95, r.Bare.P95), ratio(r.View.P99, r.Bare.P99)
	names := []struct{ name, what string }{
		{"A: request → NATS", "HTTP to replica A, JWT, one Redis pipeline (agent, its team's member set, current session id), gate script, session record, P-256 key pair, grant SET, NATS publish"},
		{"NATS → broker", "NATS delivery to replica B, its check of the request's proof (in memory) and relay pace, relay waiter, JSON-RPC over the WebSocket, worker, POST /observe on the unix socket"},
		{"broker: consume", "POST consume via the balancer to a replica: broker pass check, grant script in Redis"},
		{"broker: capture", "the broker's own CDP capture with the privacy masks' reads: getTargetInfo, then getLayoutMetrics and a DOM snapshot (DOMSnapshot.captureSnapshot) before captureScreenshot and again after it (a page with nothing to mask is sent as captured; section 2)"},
		{"broker: seal", "page JSON, ECDH + HKDF + AES-GCM, envelope JSON"},
		{"broker → NATS reply", "the envelope back over the unix socket, worker (JSON-RPC result), WebSocket to replica B, NATS publish and delivery"},
		{"A: reply → response", "open (ECDH, HKDF, AES-GCM), page JSON and JPEG check, the re-check in one Redis pipeline (session pointer and record, agent, member set), the frame's audit event published and its acknowledgement awaited (a durable replica), JSON render with base64, response headers at the viewer"},
		{"viewer: read + decode", "the rest of the HTTP body, JSON parse, base64 decode, JPEG header"},
	}
	for i, n := range names {
		d := summarize(s.legs[i])
		r.Hops = append(r.Hops, hop{Name: n.name, What: n.what, Dist: d, Share: ratio(d.P50, r.Spied.P50)})
	}
	return r
}

// alternate runs pair i of a view and a bare capture: the view first in even pairs, the
// bare capture first in odd ones, so that neither always follows the other.
func alternate(i int, view, bare func() error) error {
	first, second := view, bare
	if i%2 == 1 {
		first, second = bare, view
	}
	if err := first(); err != nil {
		return err
	}
	return second()
}

func medianInt(xs []int) int {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
