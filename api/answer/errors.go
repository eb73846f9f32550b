// Package answer is how a replica's listeners answer a failed request — the public API
// (its consume route and status feed included), the admin API and the metrics listener
// — so that the three answer alike: every answer is a row of the failure table
// (wire.Failure), which names its status, code, message, reason and Retry-After; none is
// decided here. This file is the one place that maps errors to those rows: the public
// API's errors (Public), the admin API's (Admin), and a view's failure by its reason
// (Unavailable). Clients see only the rows' plain messages, never an internal error's
// text. write.go writes the answers: the error body, no-store, the refusal of an
// ambiguous request, the answer to a path or method no route takes.
package answer

import (
	"errors"
	"strconv"
	"time"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/feed"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

// Error is an answer to a failed request: its row of the failure table (Failure) —
// status, snake_case code, plain message, the reason of a 503 and its Retry-After — with
// the message of its own that the admin API's refused changes give (Invalid, Missing).
type Error struct {
	Status  int
	Code    string
	Message string
	Failure wire.Failure
}

// To is f's row of the failure table as an answer.
func To(f wire.Failure) Error {
	r := f.Row()
	return Error{Status: r.Status, Code: r.Code, Message: r.Message, Failure: f}
}

// Row is e's row of the failure table.
func (e Error) Row() wire.FailureRow { return e.Failure.Row() }

// Body is e as the one error body every listener writes.
func (e Error) Body() wire.ErrorBody {
	var b wire.ErrorBody
	b.Error.Code, b.Error.Message = e.Code, e.Message
	return b
}

// The answers of the public API (its consume route and status feed included) that its
// handlers and the view routes' outcomes name. Each is named as its row of the failure
// table: X is To(wire.FailX).
var (
	Unauthenticated      = To(wire.FailUnauthenticated)
	Forbidden            = To(wire.FailForbidden)
	AgentNotFound        = To(wire.FailAgentNotFound)
	RateLimited          = To(wire.FailRateLimited)
	IdentityUnavailable  = To(wire.FailIdentityUnavailable)
	BadRequest           = To(wire.FailBadRequest)
	NoRoute              = To(wire.FailNoRoute)
	MethodNotAllowed     = To(wire.FailMethodNotAllowed)
	UnsupportedMediaType = To(wire.FailUnsupportedMediaType)
	Panic                = To(wire.FailPanic)
)

// The admin API's own answers that its handlers name, named as the public API's.
var (
	AdminOnly        = To(wire.FailAdminOnly)
	AdminTooLarge    = To(wire.FailAdminTooLarge)
	AdminNoRoute     = To(wire.FailAdminNoRoute)
	AdminUnreadable  = To(wire.FailAdminUnreadable)
	AdminNotAnObject = To(wire.FailAdminNotAnObject)
)

// The answers only the tables below give.
var (
	errGrant       = To(wire.FailGrantNotFound)
	errStreams     = To(wire.FailTooManyStreams)
	errUnavailable = To(wire.FailInternal)

	// Requests that could be read two ways, refused on both listeners before any route's
	// handler runs (RefuseAmbiguous).
	errTwoCredentials = To(wire.FailTwoCredentials)
	errEncodedSlash   = To(wire.FailEncodedSlash)

	errAdminNotFound = To(wire.FailAdminNotFound)
	errDirectory     = To(wire.FailDirectoryUnavailable)
)

// Invalid is the admin API's 400 of a refused change, its message naming the field.
func Invalid(message string) Error {
	e := To(wire.FailAdminInvalid)
	e.Message = message
	return e
}

// Missing is the admin API's 404 of a change that names something that is not there,
// its message naming what.
func Missing(message string) Error {
	e := To(wire.FailAdminMissing)
	e.Message = message
	return e
}

// viewFailures are the rows of a view's failure, by reason (wire.Labels).
var viewFailures = func() map[string]wire.Failure {
	m := map[string]wire.Failure{}
	for _, f := range wire.Failures() {
		if r := f.Row(); r.Reason != "" && r.Listeners&wire.ListenerPublic != 0 {
			m[r.Reason] = f
		}
	}
	return m
}()

// Unavailable is the answer to a view that failed for reason (one of wire.Labels): its
// row of the failure table, one body for every reason but identity_unavailable — the
// reason is for operators (the log line and agentfy_view_unavailable_total), never the
// client. A label that is none is answered as wire.ReasonFailed.
func Unavailable(reason string) Error {
	f, ok := viewFailures[reason]
	if !ok {
		f = wire.FailViewFailed
	}
	return To(f)
}

// publicTable maps the errors the public API's callers branch on to their rows of the
// failure table, in order; a row's reason is the failure reason of those that are a 503
// raised on this replica (Reason): the edge's identity_unavailable, the replica's own
// bounds, and the status feed's cap on streams (internal, as Redis or NATS).
var publicTable = []struct {
	err    error
	answer Error
}{
	{auth.ErrUnauthenticated, Unauthenticated},
	{auth.ErrIdentityUnavailable, IdentityUnavailable},
	{auth.ErrForbidden, Forbidden},
	{auth.ErrNotFound, AgentNotFound},
	{view.ErrRateLimited, RateLimited},
	{view.ErrGrantNotFound, errGrant},
	{view.ErrGrantForged, errGrant},
	{feed.ErrTooManyForCaller, errStreams},
	{feed.ErrTooManyListeners, errUnavailable},
	{view.ErrBusy, Unavailable(wire.ReasonInFlightLimit)},
	{view.ErrNotDurable, Unavailable(wire.ReasonNotDurable)},
	{audit.ErrUnavailable, Unavailable(wire.ReasonAuditUnavailable)},
}

// Public is the public API's answer to err: its row in publicTable, or the answer to a
// view that failed for err's reason (Reason). Redis or NATS failures, old images,
// refused grants, busy brokers, capture failures, tampered envelopes, invalid JPEGs: all
// unavailable, never "not live".
func Public(err error) Error {
	for _, row := range publicTable {
		if errors.Is(err, row.err) {
			return row.answer
		}
	}
	return Unavailable(Reason(err))
}

// Admin is the admin API's answer to err: a refused change names its field (400, or 404
// for a reference to nothing), a credential error is 401/403, anything else (Redis) is
// 503.
func Admin(err error) Error {
	var fe *directory.FieldError
	switch {
	case errors.As(err, &fe) && fe.Unknown:
		return Missing(fe.Error())
	case errors.As(err, &fe):
		return Invalid(fe.Error())
	case errors.Is(err, directory.ErrNotFound):
		return errAdminNotFound
	case errors.Is(err, auth.ErrUnauthenticated):
		return Unauthenticated
	case errors.Is(err, auth.ErrForbidden):
		return AdminOnly
	default:
		return errDirectory
	}
}

// RetryAfter is an answer's Retry-After in whole seconds: the time really left of the
// caller's own pace (rounded up) for a view refused by it, or else wait, its row's.
func RetryAfter(err error, wait time.Duration) string {
	var rl *view.RateLimitedError
	if errors.As(err, &rl) && rl.RetryAfter > 0 {
		wait = rl.RetryAfter
	}
	return strconv.Itoa(int((wait + time.Second - 1) / time.Second))
}

// Reason is why a request failed with 503, one of wire.Labels: the reason a view failed
// for as the view service passed it on (wire.Reasons), or the reason err's row of
// publicTable names, or else wire.ReasonInternal: the replica's own Redis or NATS (a
// Redis error, a NATS error), like the status feed's cap on streams, whose row says so.
func Reason(err error) string {
	var u *view.UnavailableError
	if errors.As(err, &u) {
		return u.Reason
	}
	for _, row := range publicTable {
		if r := row.answer.Row().Reason; r != "" && errors.Is(err, row.err) {
			return r
		}
	}
	return wire.ReasonInternal
}
