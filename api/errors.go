package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/feed"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

// httpError is an answer to a failed request: its row of the failure table
// (wire.Failure) — status, snake_case code, plain message, the reason of a 503 and its
// Retry-After — with the message of its own that the admin API's refused changes give.
type httpError struct {
	status  int
	code    string
	message string
	failure wire.Failure
}

// answer is f's row of the failure table as an answer.
func answer(f wire.Failure) httpError {
	r := f.Row()
	return httpError{status: r.Status, code: r.Code, message: r.Message, failure: f}
}

// row is e's row of the failure table.
func (e httpError) row() wire.FailureRow { return e.failure.Row() }

// This file is the one place that maps errors to answers, for the replica's listeners —
// the public API (its consume route and status feed included), the admin API and the
// metrics listener: the public API's errors to their rows (httpErrorOf) and the admin
// API's (adminErrorOf). Every answer, a view's failure by its reason included
// (unavailable), is a row of the failure table (wire.Failure), which names its status,
// code, message, reason and Retry-After; none is decided here. Clients see only those
// plain messages, never an internal error's text.
var (
	errUnauthenticated = answer(wire.FailUnauthenticated)
	errForbidden       = answer(wire.FailForbidden)
	errNotFound        = answer(wire.FailAgentNotFound)
	errRateLimited     = answer(wire.FailRateLimited)
	errIdentity        = answer(wire.FailIdentityUnavailable)
	errBadRequest      = answer(wire.FailBadRequest)
	errGrant           = answer(wire.FailGrantNotFound)
	errStreams         = answer(wire.FailTooManyStreams)
	errNoRoute         = answer(wire.FailNoRoute)
	errMethod          = answer(wire.FailMethodNotAllowed)
	errMediaType       = answer(wire.FailUnsupportedMediaType)
	errInternal        = answer(wire.FailPanic)
	errUnavailable     = answer(wire.FailInternal)

	// Requests that could be read two ways, refused on both listeners before any route's
	// handler runs (refuseAmbiguous).
	errTwoCredentials = answer(wire.FailTwoCredentials)
	errEncodedSlash   = answer(wire.FailEncodedSlash)

	// The admin API's own.
	errAdminOnly     = answer(wire.FailAdminOnly)
	errTooLarge      = answer(wire.FailAdminTooLarge)
	errAdminRoute    = answer(wire.FailAdminNoRoute)
	errAdminNotFound = answer(wire.FailAdminNotFound)
	errUnreadable    = answer(wire.FailAdminUnreadable)
	errNotAnObject   = answer(wire.FailAdminNotAnObject)
	errDirectory     = answer(wire.FailDirectoryUnavailable)
)

// invalid is the admin API's 400 of a refused change, its message naming the field.
func invalid(message string) httpError {
	e := answer(wire.FailAdminInvalid)
	e.message = message
	return e
}

// missing is the admin API's 404 of a change that names something that is not there,
// its message naming what.
func missing(message string) httpError {
	e := answer(wire.FailAdminMissing)
	e.message = message
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

// unavailable is the answer to a view that failed for reason (one of wire.Labels): its
// row of the failure table, one body for every reason but identity_unavailable — the
// reason is for operators (the log line and agentfy_view_unavailable_total), never the
// client. A label that is none is answered as wire.ReasonFailed.
func unavailable(reason string) httpError {
	f, ok := viewFailures[reason]
	if !ok {
		f = wire.FailViewFailed
	}
	return answer(f)
}

// errorTable maps the errors the public API's callers branch on to their rows of the
// failure table, in order; a row's reason is the failure reason of those that are a 503
// raised on this replica (reasonLabel): the edge's identity_unavailable, the replica's
// own bounds, and the status feed's cap on streams (internal, as Redis or NATS).
var errorTable = []struct {
	err    error
	answer httpError
}{
	{auth.ErrUnauthenticated, errUnauthenticated},
	{auth.ErrIdentityUnavailable, errIdentity},
	{auth.ErrForbidden, errForbidden},
	{auth.ErrNotFound, errNotFound},
	{view.ErrRateLimited, errRateLimited},
	{view.ErrGrantNotFound, errGrant},
	{view.ErrGrantForged, errGrant},
	{feed.ErrTooManyForCaller, errStreams},
	{feed.ErrTooManyListeners, errUnavailable},
	{view.ErrBusy, unavailable(wire.ReasonInFlightLimit)},
	{view.ErrNotDurable, unavailable(wire.ReasonNotDurable)},
	{audit.ErrUnavailable, unavailable(wire.ReasonAuditUnavailable)},
}

// httpErrorOf is the public API's answer to err: its row in errorTable, or the answer
// to a view that failed for err's reason (reasonLabel). Redis or NATS failures, old
// images, refused grants, busy brokers, capture failures, tampered envelopes,
// invalid JPEGs: all unavailable, never "not live".
func httpErrorOf(err error) httpError {
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			return row.answer
		}
	}
	return unavailable(reasonLabel(err))
}

// adminErrorOf is the admin API's answer to err: a refused change names its field (400,
// or 404 for a reference to nothing), a credential error is 401/403, anything else
// (Redis) is 503.
func adminErrorOf(err error) httpError {
	var fe *directory.FieldError
	switch {
	case errors.As(err, &fe) && fe.Unknown:
		return missing(fe.Error())
	case errors.As(err, &fe):
		return invalid(fe.Error())
	case errors.Is(err, directory.ErrNotFound):
		return errAdminNotFound
	case errors.Is(err, auth.ErrUnauthenticated):
		return errUnauthenticated
	case errors.Is(err, auth.ErrForbidden):
		return errAdminOnly
	default:
		return errDirectory
	}
}

func (e httpError) body() wire.ErrorBody {
	var b wire.ErrorBody
	b.Error.Code, b.Error.Message = e.code, e.message
	return b
}

// abort renders err through the public API's table (httpErrorOf), logging what the
// client does not see of a 5xx with its reason (reasonLabel).
func (s *Server) abort(c *gin.Context, err error) {
	e := httpErrorOf(err)
	if d, ok := c.Get(ctxDecision); ok {
		// A view's refusal or failure: its decision says it, once (record).
		d := d.(*decision)
		switch {
		case viewerGone(c, err):
			d.answer(outcomeCancelled, "", err)
		case e.status >= http.StatusInternalServerError:
			d.answer(e.code, reasonLabel(err), err)
		default:
			d.answer(e.code, "", err)
		}
	}
	s.answerError(c, e, err)
}

// answerError writes e as the answer to err: its Retry-After, the log line of a 5xx
// outside the view routes (a view's decision writes its own), and its body.
func (s *Server) answerError(c *gin.Context, e httpError, err error) {
	if wait := e.row().RetryAfter; wait > 0 {
		c.Header("Retry-After", retryAfter(err, wait))
	}
	if e.failure == wire.FailIdentityUnavailable && s.cfg.Metrics != nil {
		s.cfg.Metrics.identity.WithLabelValues(c.FullPath()).Inc()
	}
	if _, view := c.Get(ctxDecision); !view {
		if e.status >= http.StatusInternalServerError {
			reason := reasonLabel(err)
			c.Set(ctxReason, reason)
			s.log(c).Warn().Err(err).Str("reason", reason).Msg("request failed")
		}
		c.Set(ctxOutcome, e.code)
	}
	closeIfBody(c)
	c.AbortWithStatusJSON(e.status, e.body())
}

// retryAfter is an answer's Retry-After in whole seconds: the time really left of the
// caller's own pace (rounded up) for a view refused by it, or else wait, its row's.
func retryAfter(err error, wait time.Duration) string {
	var rl *view.RateLimitedError
	if errors.As(err, &rl) && rl.RetryAfter > 0 {
		wait = rl.RetryAfter
	}
	return strconv.Itoa(int((wait + time.Second - 1) / time.Second))
}

// answerUnrouted makes eng answer a method a route does not take with 405
// method_not_allowed and a path it has no route for with notFound, both in the one
// error body: the admin and metrics listeners' rule.
func answerUnrouted(eng *gin.Engine, notFound httpError) {
	eng.NoMethod(func(c *gin.Context) {
		closeIfBody(c)
		c.AbortWithStatusJSON(errMethod.status, errMethod.body())
	})
	eng.NoRoute(func(c *gin.Context) {
		closeIfBody(c)
		c.AbortWithStatusJSON(notFound.status, notFound.body())
	})
}

// closeIfBody ends the connection after an error answer to a request that carries a
// body: net/http would otherwise read (drain) up to 256 KiB of what is left of it once
// the handler returns, and a client that sends it one byte at a time — an
// unauthenticated one too — would hold the connection until the read deadline. The
// read deadline set to now makes that drain fail at once; refused bodies are never
// read.
func closeIfBody(c *gin.Context) {
	if c.Request.ContentLength != 0 || len(c.Request.TransferEncoding) > 0 {
		c.Header("Connection", "close")
		_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now())
	}
}

// reasonLabel is why a request failed with 503, one of wire.Labels: the reason a view
// failed for as the view service passed it on (wire.Reasons), or the reason err's row
// of errorTable names, or else wire.ReasonInternal: the replica's own Redis or NATS (a
// Redis error, a NATS error), like the status feed's cap on streams, whose row says so.
func reasonLabel(err error) string {
	var u *view.UnavailableError
	if errors.As(err, &u) {
		return u.Reason
	}
	for _, row := range errorTable {
		if r := row.answer.row().Reason; r != "" && errors.Is(err, row.err) {
			return r
		}
	}
	return wire.ReasonInternal
}
