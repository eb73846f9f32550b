package api

import (
	"errors"
	"fmt"
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

// httpError is an answer to a failed request: its HTTP status, a snake_case code and a
// plain message.
type httpError struct {
	status  int
	code    string
	message string
}

// This file is the one place that maps errors to HTTP statuses, for both listeners: the
// answers below, the public API's table (httpErrorOf) and the admin API's
// (adminErrorOf). A view's failure takes its status from the reasons' table instead
// (unavailable, wire.APIStatus), where every hop finds its reason. Clients see only
// these plain messages, never an internal error's text.
var (
	errUnauthenticated = httpError{http.StatusUnauthorized, "unauthenticated", "a valid bearer credential is required"}
	errForbidden       = httpError{http.StatusForbidden, "forbidden", "this credential may not do that"}
	errNotFound        = httpError{http.StatusNotFound, "not_found", "agent not found"}
	errRateLimited     = httpError{http.StatusTooManyRequests, "rate_limited", "one view per agent every " + strconv.Itoa(int(view.GateWindow/time.Second)) + " seconds; retry later"}
	errIdentity        = httpError{wire.APIStatus(wire.ReasonIdentityUnavailable), wire.ReasonIdentityUnavailable, "the sign-in service is not answering; retry later (this is not a sign-out)"}
	errBadRequest      = httpError{http.StatusBadRequest, "bad_request", "the request body is not valid"}
	errGrant           = httpError{http.StatusNotFound, "not_found", "capability not found"}
	errStreams         = httpError{http.StatusTooManyRequests, "too_many_streams", "this user holds too many status streams; close one"}
	errNoRoute         = httpError{http.StatusNotFound, "not_found", "no such route"}
	errMethod          = httpError{http.StatusMethodNotAllowed, "method_not_allowed", "this route does not take that method"}
	errMediaType       = httpError{http.StatusUnsupportedMediaType, "unsupported_media_type", "send application/json"}
	errInternal        = httpError{http.StatusInternalServerError, "internal", "internal error"}

	// Requests that could be read two ways, refused on both listeners before any route's
	// handler runs (refuseAmbiguous).
	errTwoCredentials = httpError{http.StatusBadRequest, "bad_request", "send one Authorization header: a request with two is ambiguous"}
	errEncodedSlash   = httpError{http.StatusBadRequest, "bad_request", "an id never contains '/': the path has an encoded slash (%2F)"}

	// The admin API's own.
	errAdminOnly     = httpError{http.StatusForbidden, "forbidden", "the admin API takes admin keys only"}
	errTooLarge      = httpError{http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is larger than %d bytes", MaxAdminBody)}
	errAdminRoute    = httpError{http.StatusNotFound, "not_found", "no such admin route"}
	errAdminNotFound = httpError{http.StatusNotFound, "not_found", "not found"}
	errUnreadable    = httpError{http.StatusBadRequest, "bad_request", "the body could not be read"}
	errNotAnObject   = httpError{http.StatusBadRequest, "bad_request", "the body is not one JSON object of valid UTF-8"}
	errDirectory     = httpError{http.StatusServiceUnavailable, "unavailable", "the directory is unavailable; retry later"}
)

// invalid is the admin API's 400 of a refused change, its message naming the field.
func invalid(message string) httpError {
	return httpError{http.StatusBadRequest, "invalid", message}
}

// missing is the admin API's 404 of a change that names something that is not there,
// its message naming what.
func missing(message string) httpError {
	return httpError{http.StatusNotFound, "not_found", message}
}

// unavailable is the answer to a view that failed for reason (one of wire.Labels): its
// status from the reasons' table, one body for every reason — the reason is for
// operators (the log line and agentfy_view_unavailable_total), never the client.
func unavailable(reason string) httpError {
	return httpError{wire.APIStatus(reason), "unavailable", "the browser view is temporarily unavailable; retry later"}
}

// errorTable maps the errors the public API's callers branch on to their answers, in
// order, and names the failure reason of those that are a 503 raised on this replica
// (reasonLabel): the edge's identity_unavailable and the replica's own bounds.
var errorTable = []struct {
	err    error
	answer httpError
	reason string
}{
	{auth.ErrUnauthenticated, errUnauthenticated, ""},
	{auth.ErrIdentityUnavailable, errIdentity, wire.ReasonIdentityUnavailable},
	{auth.ErrForbidden, errForbidden, ""},
	{auth.ErrNotFound, errNotFound, ""},
	{view.ErrRateLimited, errRateLimited, ""},
	{view.ErrGrantNotFound, errGrant, ""},
	{view.ErrGrantForged, errGrant, ""},
	{feed.ErrTooManyForCaller, errStreams, ""},
	{view.ErrBusy, unavailable(wire.ReasonInFlightLimit), wire.ReasonInFlightLimit},
	{view.ErrNotDurable, unavailable(wire.ReasonNotDurable), wire.ReasonNotDurable},
	{audit.ErrUnavailable, unavailable(wire.ReasonAuditUnavailable), wire.ReasonAuditUnavailable},
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
	switch {
	case e.status == http.StatusTooManyRequests:
		c.Header("Retry-After", retryAfter(err))
	case e == errIdentity:
		c.Header("Retry-After", strconv.Itoa(int(identityRetryAfter/time.Second)))
		if s.cfg.Metrics != nil {
			s.cfg.Metrics.identity.WithLabelValues(c.FullPath()).Inc()
		}
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

// identityRetryAfter is the Retry-After of a 503 identity_unavailable: a client's
// normal polling interval (the SDK's pollIntervalMs). The provider's return is not
// known; the verifier retries its fetches on its own backoff meanwhile.
const identityRetryAfter = 5 * time.Second

// retryAfter is a 429's Retry-After in whole seconds: the time really left of the
// caller's own pace (rounded up), or the gate's window.
func retryAfter(err error) string {
	wait := view.GateWindow
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
// failed for as the view service passed it on (wire.Reasons), or the reason errorTable
// names for err, or wire.ReasonInternal (Redis or NATS on this replica).
func reasonLabel(err error) string {
	var u *view.UnavailableError
	if errors.As(err, &u) {
		return u.Reason
	}
	for _, row := range errorTable {
		if row.reason != "" && errors.Is(err, row.err) {
			return row.reason
		}
	}
	return wire.ReasonInternal
}
