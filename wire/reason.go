package wire

import (
	"net/http"
	"slices"
)

// Reasons a view is unavailable (503). The hop that knows what went wrong names it once
// — the broker in its error body, the worker in its JSON-RPC error's data, the owner
// replica in the NATS reply's header — and every later hop passes it on unchanged. They
// label agentfy_view_unavailable_total and the requesting replica's log line, span and
// audit event, so the set is closed and none holds user, agent or page data. A code that
// is not in it is read as ReasonFailed. Each is defined by its row of the failure table
// (failure.go): whether it crosses processes, the JSON-RPC code it travels under, the
// statuses the broker and the API answer it with.
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
	// ReasonFailed: anything else (the owner could not check the grant, a reply
	// could not be sent).
	ReasonFailed = "failed"
)

// Reasons the replica that answers raises alone, about itself: they label its metric and
// log line like the others but never cross a process, so they are not in Reasons and
// Reason reads one that arrives from another process as ReasonFailed.
const (
	// ReasonIdentityUnavailable: the replica the token reached could not confirm a
	// human token's keys because the identity provider does not answer
	// (auth.ErrIdentityUnavailable). Raised at the edge, before any other hop, on any
	// route that takes a human token; it is the error body's code too, which clients
	// read as "retry, do not sign out".
	ReasonIdentityUnavailable = "identity_unavailable"
	// ReasonInFlightLimit: the replica already has its most views in flight
	// (view.ErrBusy).
	ReasonInFlightLimit = "pending_limit"
	// ReasonNotDurable: too few Redis replicas acknowledged a write (view.ErrNotDurable).
	ReasonNotDurable = "not_durable"
	// ReasonInternal: the replica's own Redis or NATS failed, or the status feed
	// reached its cap on streams (feed.MaxListeners): a bound of the replica's that no
	// view route has.
	ReasonInternal = "internal"
	// ReasonAuditUnavailable: the audit stream did not acknowledge a frame's event within
	// AuditTimeout, so the frame was discarded (audit.ErrUnavailable): no frame leaves
	// unrecorded.
	ReasonAuditUnavailable = "audit_unavailable"
)

// reasons is the closed set that crosses processes, and labels every reason, both in
// the failure table's order.
var reasons, labels = func() (crossing, all []string) {
	var local []string
	for _, r := range failures {
		switch {
		case r.Reason == "" || slices.Contains(crossing, r.Reason) || slices.Contains(local, r.Reason):
		case r.Crosses:
			crossing = append(crossing, r.Reason)
		default:
			local = append(local, r.Reason)
		}
	}
	return crossing, append(slices.Clone(crossing), local...)
}()

// reasonRow returns the replica's row of reason (the public listener's answer to a
// view that failed for it), or ReasonFailed's.
func reasonRow(reason string) FailureRow {
	for _, r := range failures {
		if r.Reason == reason && r.Listeners&ListenerPublic != 0 {
			return r
		}
	}
	return failures[FailViewFailed]
}

// RPCCodeOf is the JSON-RPC error code a worker's answer carries reason under.
func RPCCodeOf(reason string) int { return reasonRow(reason).RPC }

// ReasonOfRPCCode is the reason a JSON-RPC error code alone stands for (an answer that
// names none), ReasonFailed for a code that stands for none.
func ReasonOfRPCCode(code int) string {
	for _, r := range failures {
		if r.RPC == code && r.RPCAlone {
			return r.Reason
		}
	}
	return ReasonFailed
}

// BrokerStatus is the HTTP status the broker answers reason with;
// http.StatusInternalServerError for one the broker never names.
func BrokerStatus(reason string) int {
	for _, r := range failures {
		if r.Listeners&ListenerBroker != 0 && r.Reason == reason {
			return r.Status
		}
	}
	return http.StatusInternalServerError
}

// APIStatus is the HTTP status the API answers a view that failed for reason with
// (ReasonFailed's for a label that is not in the table).
func APIStatus(reason string) int { return reasonRow(reason).Status }

// Reasons returns every reason that crosses processes: the closed set a hop accepts from
// another (Reason, IsReason).
func Reasons() []string { return slices.Clone(reasons) }

// Labels returns every reason, those of Reasons first, then the answering replica's own
// (ReasonIdentityUnavailable, ReasonInFlightLimit, ReasonNotDurable, ReasonInternal,
// ReasonAuditUnavailable): the values of the API's reason label.
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
