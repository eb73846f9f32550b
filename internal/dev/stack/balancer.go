package stack

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentfy/agentfy/wire"
)

// maxBalancedBody bounds a request body the balancer buffers (it forwards only the
// broker's small consume requests).
const maxBalancedBody = 64 << 10 // 64 KiB

// balancer stands for the load balancer in front of the replicas that production
// brokers are configured with: round robin over live replicas, trying the next one when
// a replica does not answer.
type balancer struct {
	s      *Stack
	next   atomic.Uint32
	client *http.Client
}

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := b.s.consumeHook.Load(); h != nil && strings.HasSuffix(r.URL.Path, wire.ConsumePath) {
		(*h)()
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBalancedBody))
	if err != nil {
		http.Error(w, "bad request body", http.StatusBadRequest)
		return
	}
	b.s.mu.Lock()
	replicas := append([]*Replica(nil), b.s.Replicas...)
	b.s.mu.Unlock()
	start := int(b.next.Add(1))
	for i := range replicas {
		rep := replicas[(start+i)%len(replicas)]
		if rep == nil {
			continue
		}
		// The target is one of the stack's own replicas; only the path comes from the request.
		req, err := http.NewRequestWithContext(r.Context(), r.Method, rep.URL+r.URL.RequestURI(), bytes.NewReader(body)) //nolint:gosec // see above
		if err != nil {
			continue
		}
		req.Header = r.Header.Clone()
		resp, err := b.client.Do(req) //nolint:gosec // a replica of the stack, see above
		if err != nil {
			continue // not answering: the next one
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		_ = resp.Body.Close()
		return
	}
	http.Error(w, "no replica answers", http.StatusBadGateway)
}

// startBalancer serves the balancer on a loopback port.
func (s *Stack) startBalancer(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	b := &balancer{s: s, client: &http.Client{Timeout: 10 * time.Second}}
	srv := &http.Server{Handler: b, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	s.LB = "http://" + ln.Addr().String()
	s.closers = append(s.closers, func() { _ = srv.Close() })
	return nil
}
