package stack

import (
	"net/http"
	"sync"

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
