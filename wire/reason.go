package wire

import (
	"net/http"
	"slices"
)

// Reasons a view is unavailable (503). The hop that knows what went wrong names it once
// — the broker in its error body, the worker in its JSON-RPC error's data, the owner
// replica in the NATS reply's header — and every later hop passes it on unchanged. They
// label the API's outcome metric and its log line, so the set is closed and none holds
// user, agent or page data. A code that is not in it is read as ReasonFailed. Each has
// one row in reasonTable, below.
const (
	// ReasonNoChannel: no replica holds the worker's socket, or it closed meanwhile.
	ReasonNoChannel = "no_channel"
	// ReasonUnsupported: the worker image cannot relay views (no browserView in its
	// hello, or it answered method-not-found).
	ReasonUnsupported = "unsupported"
	// ReasonBusy: a bound was reached on the way — the owner's waiters or pace, the
	// worker's relays, or the broker's one capture at a time.
	ReasonBusy = "busy"
	// ReasonRefused: the grant was not there to redeem (expired, consumed, another
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
	// ReasonFailed: anything else (the owner could not check the grant, a reply
	// could not be sent).
	ReasonFailed = "failed"
)

// Reasons the requesting replica alone raises, about itself: they label its metric and
// log line like the others but never cross a process, so they are not in Reasons and
// Reason reads one that arrives from another process as ReasonFailed.
const (
	// ReasonInFlightLimit: the replica already has its most views in flight
	// (view.ErrBusy).
	ReasonInFlightLimit = "pending_limit"
	// ReasonNotDurable: too few Redis replicas acknowledged a write (view.ErrNotDurable).
	ReasonNotDurable = "not_durable"
	// ReasonInternal: the replica's own Redis or NATS failed.
	ReasonInternal = "internal"
	// ReasonAuditUnavailable: the audit stream did not acknowledge a frame's event within
	// AuditTimeout, so the frame was discarded (audit.ErrUnavailable): no frame leaves
	// unrecorded.
	ReasonAuditUnavailable = "audit_unavailable"
)

// The JSON-RPC error codes of a view's error answer, which tool calls use too (package
// jsonrpc has the channel's other codes).
const (
	// RPCMethodNotFound: JSON-RPC's own, for a method the worker does not know.
	RPCMethodNotFound = -32601
	// RPCInvalidParams: JSON-RPC's own, for params that do not decode.
	RPCInvalidParams = -32602
	// RPCBusy: a bound was reached (too many views or tool calls in flight).
	RPCBusy = -32001
	// RPCUnavailable: the broker or browser could not serve the request.
	RPCUnavailable = -32002
	// RPCRefused: the broker could not redeem the view's grant.
	RPCRefused = -32004
)

// reasonRow is one reason of the table, with what every hop needs of it. The reason is
// its own metric label and log value at every hop — that is what passing it on unchanged
// means — so it has no column of its own for them. Neither has the message a client
// reads: the API answers every view's failure with one body (the reason is for
// operators), and the broker's message is its error's, not its reason's (api/errors.go
// and broker/errors.go hold those).
type reasonRow struct {
	reason string
	// local: raised by the requesting replica about itself and never on the wire (not in
	// Reasons).
	local bool
	// rpc is the JSON-RPC code a worker's error answer carries the reason under (its data
	// names the reason itself; the code is for a replica that reads codes alone), and
	// fromCode whether that code alone stands for it (an older worker's answer without
	// data). 0 for a local reason, never sent.
	rpc      int
	fromCode bool
	// broker is the HTTP status the broker answers the reason with; 0: the broker never
	// names it.
	broker int
	// api is the HTTP status the API answers a view that failed for the reason with.
	api int
}

// reasonTable is the one table of a view's failure reasons: every hop looks a reason up
// here and none translates it, so a new reason is one row (and its constant).
var reasonTable = []reasonRow{
	// reason, local, JSON-RPC code, the code alone stands for it, broker's status, API's status
	{ReasonNoChannel, false, RPCUnavailable, false, 0, http.StatusServiceUnavailable},
	{ReasonUnsupported, false, RPCMethodNotFound, true, 0, http.StatusServiceUnavailable},
	{ReasonBusy, false, RPCBusy, true, http.StatusConflict, http.StatusServiceUnavailable},
	{ReasonRefused, false, RPCRefused, true, http.StatusBadGateway, http.StatusServiceUnavailable},
	{ReasonCapture, false, RPCUnavailable, true, http.StatusServiceUnavailable, http.StatusServiceUnavailable},
	{ReasonBrokerDown, false, RPCUnavailable, false, http.StatusServiceUnavailable, http.StatusServiceUnavailable},
	{ReasonBrokerError, false, RPCUnavailable, false, http.StatusInternalServerError, http.StatusServiceUnavailable},
	{ReasonBadRequest, false, RPCInvalidParams, true, http.StatusBadRequest, http.StatusServiceUnavailable},
	{ReasonTimeout, false, RPCUnavailable, false, 0, http.StatusServiceUnavailable},
	{ReasonInvalid, false, RPCUnavailable, false, 0, http.StatusServiceUnavailable},
	{ReasonIdentityUnavailable, false, RPCUnavailable, false, 0, http.StatusServiceUnavailable},
	{ReasonFailed, false, RPCUnavailable, false, 0, http.StatusServiceUnavailable},
	{ReasonInFlightLimit, true, 0, false, 0, http.StatusServiceUnavailable},
	{ReasonNotDurable, true, 0, false, 0, http.StatusServiceUnavailable},
	{ReasonInternal, true, 0, false, 0, http.StatusServiceUnavailable},
	{ReasonAuditUnavailable, true, 0, false, 0, http.StatusServiceUnavailable},
}

// reasons is the closed set that crosses processes, and labels every reason, both in
// the table's order.
var reasons, labels = func() (crossing, all []string) {
	for _, row := range reasonTable {
		if !row.local {
			crossing = append(crossing, row.reason)
		}
		all = append(all, row.reason)
	}
	return crossing, all
}()

// row returns reason's row, or ReasonFailed's.
func row(reason string) reasonRow {
	for _, r := range reasonTable {
		if r.reason == reason {
			return r
		}
	}
	return row(ReasonFailed)
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

// APIStatus is the HTTP status the API answers a view that failed for reason with
// (ReasonFailed's for a label that is not in the table).
func APIStatus(reason string) int { return row(reason).api }

// Reasons returns every reason that crosses processes: the closed set a hop accepts from
// another (Reason, IsReason).
func Reasons() []string { return slices.Clone(reasons) }

// Labels returns every reason, the requesting replica's own (ReasonInFlightLimit,
// ReasonNotDurable, ReasonInternal) after those of Reasons: the values of the API's
// reason label.
func Labels() []string { return slices.Clone(labels) }

// Reason returns code when it is one of the reasons, and ReasonFailed otherwise: what
// arrives from another process is never a label of its own choosing.
func Reason(code string) string { return ReasonOr(code, ReasonFailed) }

// ReasonOr returns code when it is one of the reasons, and otherwise otherwise: the
// reason a hop passes on for a code it received, which is the code itself or what the
// hop itself saw (a worker reads a broker's code that is none as ReasonBrokerError).
func ReasonOr(code, otherwise string) string {
	if IsReason(code) {
		return code
	}
	return otherwise
}

// IsReason reports whether code is one of the reasons that cross processes.
func IsReason(code string) bool { return slices.Contains(reasons, code) }
