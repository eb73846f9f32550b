package wire

import "time"

// The deadline budget of one view, hop by hop from the viewer inwards. Each hop's
// deadline, plus HopMargin for its answer to travel back, fits inside the deadline of
// the hop that waits for it (budget_test.go proves the chain), so the reason of the
// innermost failure reaches the viewer instead of an outer timeout.
const (
	// ViewTimeout bounds the requesting replica's whole wait, NATS to reply (SPEC: 9 s).
	ViewTimeout = 9 * time.Second
	// RelayTimeout bounds the owner replica's waiter, from the NATS request's
	// arrival (its check of the request's proof, which reads nothing, included) to the
	// worker's answer (SPEC: 8 s).
	RelayTimeout = 8 * time.Second
	// WorkerCaptureTimeout bounds the worker's call to the broker's /observe.
	WorkerCaptureTimeout = 7250 * time.Millisecond
	// BrokerCaptureTimeout bounds the broker's whole capture: the redemption and
	// the capture.
	BrokerCaptureTimeout = 7 * time.Second
	// BrokerConsumeTimeout bounds the broker's redemption of the request id.
	BrokerConsumeTimeout = 3 * time.Second
	// BrokerScreenshotTimeout bounds the CDP calls of one capture's screenshot and masks.
	BrokerScreenshotTimeout = 5 * time.Second

	// AuditTimeout bounds the requesting replica's wait, once a frame is in hand, for
	// the audit stream's acknowledgement of its event; without it the frame is
	// discarded (ReasonAuditUnavailable). It follows ViewTimeout: a viewer's request
	// lasts at most ViewTimeout + AuditTimeout, under ten seconds with HopMargin
	// (budget_test.go), the poll a viewer's page may give one view.
	AuditTimeout = 500 * time.Millisecond

	// HopMargin is the time left to each hop, after the hop inside it gave up, to
	// answer with that hop's reason: a few small writes on loopback or a LAN.
	HopMargin = 250 * time.Millisecond
)

// Hop is one waiting step of a view and its deadline.
type Hop struct {
	Name    string
	Timeout time.Duration
}

// Budget is the chain of a view's deadlines, outermost first.
func Budget() []Hop {
	return []Hop{
		{"requesting replica (view)", ViewTimeout},
		{"owner replica (waiter)", RelayTimeout},
		{"worker (/observe)", WorkerCaptureTimeout},
		{"broker (capture)", BrokerCaptureTimeout},
	}
}
