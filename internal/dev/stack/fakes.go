package stack

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"

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

// SealingBroker stands in for a broker that redeems each view's grant as a real one does
// (broker.ConsumeClient), then seals whatever plaintext the test chose: a frame masked
// whole for a given reason, which a real broker sends only for pages built to cause it,
// or a page no honest broker sends. The replicas must pass the first on to the viewer
// and refuse the second. It answers tools with 404.
type SealingBroker struct {
	consume atomic.Pointer[broker.ConsumeClient]
	plain   atomic.Pointer[[]byte]
}

// Redeem makes b redeem grants at apiURL (a replica or the balancer) with pass, the
// session's broker pass, which exists only once the session b serves has started.
func (b *SealingBroker) Redeem(apiURL, pass string) error {
	c, err := broker.NewConsumeClient(&http.Client{}, apiURL, pass)
	if err != nil {
		return err
	}
	b.consume.Store(c)
	return nil
}

// Seal sets the plaintext b seals from the next capture on; until the first call, and
// until Redeem, a capture answers 503 capture.
func (b *SealingBroker) Seal(plain []byte) {
	plain = append([]byte(nil), plain...)
	b.plain.Store(&plain)
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
	if err != nil || wire.DecodeStrict(body, &req) != nil {
		failCapture(w, wire.ReasonBadRequest, "the request body is not valid JSON of the expected shape")
		return
	}
	c, plain := b.consume.Load(), b.plain.Load()
	if c == nil || plain == nil {
		failCapture(w, wire.ReasonCapture, "nothing to seal yet")
		return
	}
	key, err := c.Consume(r.Context(), req.RequestID)
	if err != nil {
		failCapture(w, wire.ReasonRefused, "the observation capability was refused")
		return
	}
	sealed, err := envelope.SealJSON(rand.Reader, key, req.RequestID, *plain)
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
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	body.Error.Code, body.Error.Message = reason, message
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(wire.BrokerStatus(reason))
	_ = json.NewEncoder(w).Encode(body)
}
