package wire

import (
	"net/http"
	"slices"
)

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
	// ReasonIdentityUnavailable: the requester's replica could not confirm a human
	// token's keys because the identity provider does not answer (auth.
	// ErrIdentityUnavailable). Raised at the edge, before any other hop; it is the
	// error body's code too, which clients read as "retry, do not sign out".
	ReasonIdentityUnavailable = "identity_unavailable"
	// ReasonFailed: anything else (the owner could not check the capability, a reply
	// could not be sent).
	ReasonFailed = "failed"
)

// The JSON-RPC error codes of a view's error answer (package jsonrpc names them too).
const (
	RPCMethodNotFound = -32601
	RPCInvalidParams  = -32602
	RPCBusy           = -32001
	RPCUnavailable    = -32002
	RPCRefused        = -32004
)

// reasonRow is one reason of the table: the JSON-RPC code a worker's error answer
// carries it under (its data names the reason itself; the code is for a replica that
// reads codes alone), whether that code alone stands for it (an older worker's answer
// without data), and the HTTP status the broker answers it with (0: the broker never
// names it). Every reason is answered 503 by the API, labels
// agentfy_view_unavailable_total and the log line as it is, and travels between the
// replicas in the NATS reply's error header unchanged.
type reasonRow struct {
	reason   string
	rpc      int
	fromCode bool
	broker   int
}

// reasonTable is the one table of a view's failure reasons.
var reasonTable = []reasonRow{
	{ReasonNoChannel, RPCUnavailable, false, 0},
	{ReasonUnsupported, RPCMethodNotFound, true, 0},
	{ReasonBusy, RPCBusy, true, http.StatusConflict},
	{ReasonRefused, RPCRefused, true, http.StatusBadGateway},
	{ReasonCapture, RPCUnavailable, true, http.StatusServiceUnavailable},
	{ReasonBrokerDown, RPCUnavailable, false, http.StatusServiceUnavailable},
	{ReasonBrokerError, RPCUnavailable, false, http.StatusInternalServerError},
	{ReasonBadRequest, RPCInvalidParams, true, http.StatusBadRequest},
	{ReasonTimeout, RPCUnavailable, false, 0},
	{ReasonInvalid, RPCUnavailable, false, 0},
	{ReasonIdentityUnavailable, RPCUnavailable, false, 0},
	{ReasonFailed, RPCUnavailable, false, 0},
}

// reasons is the closed set, in the table's order.
var reasons = func() []string {
	r := make([]string, len(reasonTable))
	for i, row := range reasonTable {
		r[i] = row.reason
	}
	return r
}()

// row returns reason's row, or ReasonFailed's.
func row(reason string) reasonRow {
	for _, r := range reasonTable {
		if r.reason == reason {
			return r
		}
	}
	return reasonTable[len(reasonTable)-1]
}

// RPCCodeOf is the JSON-RPC error code a worker's answer carries reason under.
func RPCCodeOf(reason string) int { return row(reason).rpc }

// ReasonOfRPCCode is the reason a JSON-RPC error code alone stands for (an answer that
// names none), ReasonFailed for a code that stands for none.
func ReasonOfRPCCode(code int) string {
	for _, r := range reasonTable {
		if r.rpc == code && r.fromCode {
			return r.reason
		}
	}
	return ReasonFailed
}

// BrokerStatus is the HTTP status the broker answers reason with;
// http.StatusInternalServerError for one the broker never names.
func BrokerStatus(reason string) int {
	if s := row(reason).broker; s != 0 {
		return s
	}
	return http.StatusInternalServerError
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
