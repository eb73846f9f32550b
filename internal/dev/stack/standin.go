package stack

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentfy/agentfy/broker"
	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/wire"
)

// HoldingBroker stands in for a broker whose captures never finish until the test
// releases them (to fill waiter maps and pending bounds); it answers tools with 404.
type HoldingBroker struct {
	// Entered receives a value each time a capture starts waiting.
	Entered chan struct{}
	release chan struct{}
	once    sync.Once
}

// NewHoldingBroker returns a HoldingBroker whose Entered channel buffers n arrivals.
func NewHoldingBroker(n int) *HoldingBroker {
	return &HoldingBroker{Entered: make(chan struct{}, n), release: make(chan struct{})}
}

// Release lets every held and future capture answer 503 capture.
func (b *HoldingBroker) Release() { b.once.Do(func() { close(b.release) }) }

func (b *HoldingBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != wire.CapturePath {
		http.Error(w, `{"error":{"code":"not_found","message":"no such route"}}`, http.StatusNotFound)
		return
	}
	select {
	case b.Entered <- struct{}{}:
	default:
	}
	select {
	case <-b.release:
	case <-r.Context().Done():
	}
	http.Error(w, `{"error":{"code":"capture","message":"released"}}`, http.StatusServiceUnavailable)
}

// SealingBroker is the one stand-in for a browser broker without Chromium. It answers
// POST /observe (wire.CapturePath) as broker.Broker does — the request id redeemed at
// the consume route with the session's broker pass (broker.ConsumeClient, the real
// broker's client, within wire.BrokerConsumeTimeout), the page sealed to the key that
// returns (envelope.SealJSON) — except that the page is not captured: it is what Page
// makes, or else what Seal set. Tests seal what a real broker sends only for pages
// built for it (a frame masked whole) or what no honest broker sends (a forged page),
// which the replicas must pass on or refuse; the capacity bench seals a fixed frame
// naming its agent behind each of thousands of workers. It answers tools with 404.
type SealingBroker struct {
	// Page, when set, makes the plaintext of each capture, at now; it is not changed
	// after the first capture.
	Page func(now time.Time) ([]byte, error)
	// OnWork, when set, gets the time each capture spent making and sealing its page
	// (the stand-in's own work, which the bench reports latencies net of).
	OnWork func(time.Duration)

	consume atomic.Pointer[broker.ConsumeClient]
	plain   atomic.Pointer[[]byte]
}

// Redeem makes b redeem grants at apiURL (a replica or the balancer) with pass, the
// session's broker pass, which exists only once the session b serves has started.
func (b *SealingBroker) Redeem(apiURL, pass string) error {
	return b.RedeemAt(&http.Client{}, []string{apiURL}, pass)
}

// RedeemAt is Redeem at the API URLs tried in turn (broker.NewFailoverConsumeClient),
// through client.
func (b *SealingBroker) RedeemAt(client *http.Client, apiURLs []string, pass string) error {
	c, err := broker.NewFailoverConsumeClient(client, apiURLs, pass)
	if err != nil {
		return err
	}
	b.consume.Store(c)
	return nil
}

// Seal sets the plaintext b seals from the next capture on, unless Page is set; until
// the first call, and until Redeem, a capture answers 503 capture.
func (b *SealingBroker) Seal(plain []byte) {
	plain = append([]byte(nil), plain...)
	b.plain.Store(&plain)
}

// Serve serves b on the broker's socket in dir (wire.SocketName, the directory made
// if missing), as a session's broker does, until stop.
func (b *SealingBroker) Serve(ctx context.Context, dir string) (stop func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "unix", filepath.Join(dir, wire.SocketName))
	if err != nil {
		return nil, err
	}
	// A short idle timeout: a worker keeps idle connections to its broker, and the
	// bench's ten thousand would cost a descriptor each on both sides between views.
	srv := &http.Server{Handler: b, ReadHeaderTimeout: 2 * time.Second, IdleTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, nil
}

// ServeHTTP serves POST /observe (wire.CapturePath): redeem, seal, answer the envelope.
func (b *SealingBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != wire.CapturePath {
		http.Error(w, `{"error":{"code":"not_found","message":"no such route"}}`, http.StatusNotFound)
		return
	}
	var req struct {
		RequestID string `json:"requestId"`
	}
	body, err := wire.ReadAll(http.MaxBytesReader(w, r.Body, broker.MaxBodyBytes))
	if err != nil || wire.DecodeStrict(body, &req) != nil || !envelope.ValidRequestID(req.RequestID) {
		failCapture(w, wire.ReasonBadRequest, "the request body is not valid JSON of the expected shape")
		return
	}
	c := b.consume.Load()
	plain := b.plain.Load()
	if c == nil || (plain == nil && b.Page == nil) {
		failCapture(w, wire.ReasonCapture, "nothing to seal yet")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), wire.BrokerConsumeTimeout)
	key, err := c.Consume(ctx, req.RequestID)
	cancel()
	if err != nil {
		failCapture(w, wire.ReasonRefused, "the grant was refused")
		return
	}
	start := time.Now()
	var page []byte
	if b.Page != nil {
		page, err = b.Page(start)
	} else {
		page = *plain
	}
	var sealed []byte
	if err == nil {
		sealed, err = envelope.SealJSON(rand.Reader, key, req.RequestID, page)
	}
	if b.OnWork != nil {
		b.OnWork(time.Since(start))
	}
	if err != nil {
		failCapture(w, wire.ReasonCapture, "the page could not be sealed")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(sealed)
}

// failCapture answers a capture with a view's failure reason as a broker does: the
// reason as the error's code, its status from the reasons' table.
func failCapture(w http.ResponseWriter, reason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(wire.BrokerStatus(reason))
	_ = json.NewEncoder(w).Encode(wire.ErrorBody{Error: wire.ErrorDetail{Code: reason, Message: message}})
}
