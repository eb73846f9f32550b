package broker

import (
	"errors"
	"net/http"

	"github.com/agentfy/agentfy/broker/egress"
	"github.com/agentfy/agentfy/wire"
)

// Errors the broker's operations return. Callers branch on them with
// errors.Is; [statusOf] maps each to one HTTP status, code and plain message.
var (
	// ErrBadBody is a request body that is not the expected JSON.
	ErrBadBody = errors.New("malformed request body")
	// ErrBodyTooLarge is a request body over MaxBodyBytes.
	ErrBodyTooLarge = errors.New("request body too large")
	// ErrBadRequestID is a request id that is not 64 lowercase hex digits.
	ErrBadRequestID = errors.New("malformed request id")
	// ErrBadURL is a URL that is too long, unparsable or of a refused scheme.
	ErrBadURL = errors.New("refused url")
	// ErrRefusedAddress is a URL whose host the agent's browser may not reach: an
	// address of the deployment's own network or a cloud metadata service
	// (Config.Egress). Its error wraps an *egress.RefusedError naming the rule.
	ErrRefusedAddress = errors.New("refused address")
	// ErrBadStep is a browser_play step that is unknown or malformed.
	ErrBadStep = errors.New("malformed step")
	// ErrUnknownTab is a tab id that names no live tab.
	ErrUnknownTab = errors.New("unknown tab")
	// ErrTooManyTabs is a browser_open beyond Config.MaxTabs live tabs.
	ErrTooManyTabs = errors.New("too many tabs")
	// ErrQueueFull is a tool operation refused because the queue is full.
	ErrQueueFull = errors.New("tool queue full")
	// ErrToolTimeout is a tool operation that did not finish in time.
	ErrToolTimeout = errors.New("tool operation timed out")
	// ErrStepFailed is a browser_play step Chromium could not perform.
	ErrStepFailed = errors.New("step failed")
	// ErrBusy is a capture refused because another one is running.
	ErrBusy = errors.New("capture in progress")
	// ErrGrantRefused is a request id the API did not redeem, for any
	// reason, including an unreachable API or a malformed public key.
	ErrGrantRefused = errors.New("grant refused")
	// ErrCaptureFailed is a capture that failed or missed its deadline.
	ErrCaptureFailed = errors.New("capture failed")
	// ErrClosed is an operation on a broker that is shutting down.
	ErrClosed = errors.New("broker closed")
)

// apiError is what a client sees of an error: a status, a snake_case code and
// a plain message that never carries internal details. The code of every error
// /observe can answer is a wire reason (wire.Reason*): the worker passes it on
// unchanged, and it reaches the viewer's replica, its metric and its log as it is.
type apiError struct {
	status  int
	code    string
	message string
}

// errorTable is the one place that maps the broker's errors to what a client sees, in
// order. A row whose code is a view's failure reason (reasonError) takes its status from
// the reasons' table (wire.BrokerStatus), where every hop finds the reason, and keeps
// only its message here: a message is the error's, not the reason's (two errors are
// bad_request, each with its own). The other rows are the broker's own codes — the tool
// routes' and the body bound's — which are not view reasons (a worker passes any of
// them on as broker_error), so their status is decided here.
var errorTable = []struct {
	err error
	apiError
}{
	{ErrBadBody, reasonError(wire.ReasonBadRequest, "the request body is not valid JSON of the expected shape")},
	{ErrBodyTooLarge, apiError{http.StatusRequestEntityTooLarge, "body_too_large", "the request body is too large"}},
	{ErrBadRequestID, reasonError(wire.ReasonBadRequest, "requestId must be 64 lowercase hex digits")},
	{ErrBadURL, apiError{http.StatusBadRequest, "bad_url", "the url must be an http or https URL, or about:blank"}},
	{ErrRefusedAddress, apiError{http.StatusForbidden, "refused_address", "the url's host is an address of the deployment's own network or a metadata service, which the agent's browser may not reach"}},
	{ErrBadStep, apiError{http.StatusBadRequest, "bad_step", "a step is unknown or malformed"}},
	{ErrUnknownTab, apiError{http.StatusNotFound, "unknown_tab", "no open tab has this id"}},
	{ErrTooManyTabs, apiError{http.StatusConflict, "too_many_tabs", "too many tabs are open"}},
	{ErrQueueFull, apiError{http.StatusTooManyRequests, "queue_full", "too many browser tool calls are waiting"}},
	{ErrToolTimeout, apiError{http.StatusGatewayTimeout, "tool_timeout", "the browser tool call did not finish in time"}},
	{ErrStepFailed, apiError{http.StatusUnprocessableEntity, "step_failed", "the browser could not perform a step"}},
	{ErrBusy, reasonError(wire.ReasonBusy, "another observation is in progress")},
	{ErrGrantRefused, reasonError(wire.ReasonRefused, "the observation capability was refused")},
	{ErrCaptureFailed, reasonError(wire.ReasonCapture, "the browser could not be captured in time")},
	{ErrClosed, reasonError(wire.ReasonBrokerDown, "the broker is shutting down")},
}

// internalError is what a client sees of any error not in errorTable.
var internalError = reasonError(wire.ReasonBrokerError, "internal error")

// The answers of a request no route takes: not errors of an operation, so not in
// errorTable, but decided here all the same.
var (
	errMethod  = apiError{http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed"}
	errNoRoute = apiError{http.StatusNotFound, "not_found", "no such route"}
)

// reasonError is the answer for a view's failure reason: the reason as its code and
// its status looked up in the reasons' table (wire.BrokerStatus); only the message is
// the error's own.
func reasonError(reason, message string) apiError {
	return apiError{wire.BrokerStatus(reason), reason, message}
}

// statusOf maps an error to what the client sees. A refused address's message names
// the rule that refused it and the host the caller asked for (its own input), never a
// path.
func statusOf(err error) apiError {
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			var refused *egress.RefusedError
			if errors.As(err, &refused) {
				e.message = refused.Error()
			}
			return e.apiError
		}
	}
	return internalError
}
