package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/feed"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

// httpError is one row of the table below.
type httpError struct {
	status  int
	code    string
	message string
}

// The one place that maps errors to HTTP statuses. Clients see only these plain
// messages, never an internal error's text.
var (
	errUnauthenticated = httpError{http.StatusUnauthorized, "unauthenticated", "a valid bearer credential is required"}
	errForbidden       = httpError{http.StatusForbidden, "forbidden", "this credential may not do that"}
	errNotFound        = httpError{http.StatusNotFound, "not_found", "agent not found"}
	errRateLimited     = httpError{http.StatusTooManyRequests, "rate_limited", "one view per agent every " + strconv.Itoa(int(view.GateWindow/time.Second)) + " seconds; retry later"}
	errUnavailable     = httpError{http.StatusServiceUnavailable, "unavailable", "the browser view is temporarily unavailable; retry later"}
	errIdentity        = httpError{http.StatusServiceUnavailable, wire.ReasonIdentityUnavailable, "the sign-in service is not answering; retry later (this is not a sign-out)"}
	errBadRequest      = httpError{http.StatusBadRequest, "bad_request", "the request body is not valid"}
	errGrant           = httpError{http.StatusNotFound, "not_found", "capability not found"}
	errStreams         = httpError{http.StatusTooManyRequests, "too_many_streams", "this user holds too many status streams; close one"}
	errNoRoute         = httpError{http.StatusNotFound, "not_found", "no such route"}
	errMethod          = httpError{http.StatusMethodNotAllowed, "method_not_allowed", "this route does not take that method"}
)

// httpErrorOf is the answer to err: the one place an error becomes an HTTP status,
// code and message.
func httpErrorOf(err error) httpError {
	switch {
	case errors.Is(err, auth.ErrUnauthenticated):
		return errUnauthenticated
	case errors.Is(err, auth.ErrIdentityUnavailable):
		return errIdentity
	case errors.Is(err, auth.ErrForbidden):
		return errForbidden
	case errors.Is(err, auth.ErrNotFound):
		return errNotFound
	case errors.Is(err, view.ErrRateLimited):
		return errRateLimited
	case errors.Is(err, view.ErrGrantNotFound), errors.Is(err, view.ErrGrantForged):
		return errGrant
	case errors.Is(err, feed.ErrTooManyForCaller):
		return errStreams
	default:
		// Redis or NATS failures, old images, refused capabilities, busy brokers,
		// capture failures, tampered envelopes, invalid JPEGs: all unavailable, never
		// "not live".
		return errUnavailable
	}
}

func (e httpError) body() wire.ErrorBody {
	var b wire.ErrorBody
	b.Error.Code, b.Error.Message = e.code, e.message
	return b
}

// abort renders err through the table, logging what the client does not see.
func (s *Server) abort(c *gin.Context, err error) {
	e := httpErrorOf(err)
	switch {
	case e.status == http.StatusTooManyRequests:
		c.Header("Retry-After", retryAfter(err))
	case e == errIdentity:
		c.Header("Retry-After", strconv.Itoa(int(identityRetryAfter/time.Second)))
		if s.cfg.Metrics != nil {
			s.cfg.Metrics.identity.WithLabelValues(c.FullPath()).Inc()
		}
	}
	if e.status >= http.StatusInternalServerError {
		reason := reasonLabel(err)
		c.Set(ctxReason, reason)
		s.log(c).Warn().Err(err).Str("reason", reason).Msg("request failed")
	}
	c.Set(ctxOutcome, e.code)
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

// reasonLabel is why a request failed with 503, from a bounded set: a view's wire reason
// (wire.Reasons, identity_unavailable among them), pending_limit, not_durable (too few Redis replicas acknowledged a
// write), or internal (Redis or NATS on this replica).
func reasonLabel(err error) string {
	var u *view.UnavailableError
	if errors.As(err, &u) {
		return u.Reason
	}
	if errors.Is(err, auth.ErrIdentityUnavailable) {
		return wire.ReasonIdentityUnavailable
	}
	if errors.Is(err, view.ErrBusy) {
		return "pending_limit"
	}
	if errors.Is(err, view.ErrNotDurable) {
		return "not_durable"
	}
	return "internal"
}
