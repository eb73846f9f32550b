package wire

import "slices"

// Reasons a view is unavailable (503). The hop that knows what went wrong names it once
// — the broker in its error body, the worker in its JSON-RPC error's data, the owner
// replica in the NATS reply's header — and every later hop passes it on unchanged. They
// label the API's outcome metric and its log line, so the set is closed and none holds
// user, agent or page data. A code that is not in it is read as ReasonFailed.
const (
	// ReasonNoChannel: no replica holds the worker's socket, or it closed meanwhile.
	ReasonNoChannel = "no_channel"
	// ReasonUnsupported: the worker image cannot relay views (no browserView in its
	// hello, or it answered method-not-found).
	ReasonUnsupported = "unsupported"
	// ReasonBusy: a bound was reached on the way — the owner's waiters or pace, the
	// worker's relays, or the broker's one observation at a time.
	ReasonBusy = "busy"
	// ReasonRefused: the capability was not there to redeem (expired, consumed, another
	// session's, or never stored).
	ReasonRefused = "refused"
	// ReasonCapture: the broker could not capture the tab in time.
	ReasonCapture = "capture"
	// ReasonBrokerDown: the worker could not reach its broker, or the broker is
	// shutting down.
	ReasonBrokerDown = "broker_down"
	// ReasonBrokerError: the broker answered something the worker does not understand
	// (an internal error, an unreadable body).
	ReasonBrokerError = "broker_error"
	// ReasonBadRequest: a hop refused the request as malformed (never expected between
	// honest parts).
	ReasonBadRequest = "bad_request"
	// ReasonTimeout: a hop had no answer within its deadline.
	ReasonTimeout = "timeout"
	// ReasonInvalid: the reply did not open or the page did not validate.
	ReasonInvalid = "invalid"
	// ReasonFailed: anything else (the owner could not check the capability, a reply
	// could not be sent).
	ReasonFailed = "failed"
)

// reasons is the closed set.
var reasons = []string{
	ReasonNoChannel, ReasonUnsupported, ReasonBusy, ReasonRefused, ReasonCapture,
	ReasonBrokerDown, ReasonBrokerError, ReasonBadRequest, ReasonTimeout, ReasonInvalid,
	ReasonFailed,
}

// Reasons returns every reason.
func Reasons() []string { return slices.Clone(reasons) }

// Reason returns code when it is one of the reasons, and ReasonFailed otherwise: what
// arrives from another process is never a label of its own choosing.
func Reason(code string) string {
	if slices.Contains(reasons, code) {
		return code
	}
	return ReasonFailed
}

// IsReason reports whether code is one of the reasons.
func IsReason(code string) bool { return slices.Contains(reasons, code) }
