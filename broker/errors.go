package broker

import (
	"errors"

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

// apiError is what a client sees of an error: its row of the failure table
// (wire.Failure) — a status, a snake_case code and a plain message that never carries
// internal details. The code of every error /observe can answer is a wire reason
// (wire.Reason*): the worker passes it on unchanged, and it reaches the viewer's
// replica, its metric and its log as it is.
type apiError struct {
	status  int
	code    string
	message string
}

// answer is f's row of the failure table as an answer.
func answer(f wire.Failure) apiError {
	r := f.Row()
	return apiError{r.Status, r.Code, r.Message}
}

// errorTable is the one place that maps the broker's errors to their rows of the
// failure table, in order: the rows decide every status, code and message (a view's
// failure's code is its reason, with the status the worker and the replicas read it
// by; the tool routes' and the body bound's codes are no reasons, and a worker passes
// any of them on as broker_error).
var errorTable = []struct {
	err error
	apiError
}{
	{ErrBadBody, answer(wire.FailBrokerBadBody)},
	{ErrBodyTooLarge, answer(wire.FailBrokerBodyTooLarge)},
	{ErrBadRequestID, answer(wire.FailBrokerBadRequestID)},
	{ErrBadURL, answer(wire.FailBrokerBadURL)},
	{ErrRefusedAddress, answer(wire.FailBrokerRefusedAddress)},
	{ErrBadStep, answer(wire.FailBrokerBadStep)},
	{ErrUnknownTab, answer(wire.FailBrokerUnknownTab)},
	{ErrTooManyTabs, answer(wire.FailBrokerTooManyTabs)},
	{ErrQueueFull, answer(wire.FailBrokerQueueFull)},
	{ErrToolTimeout, answer(wire.FailBrokerToolTimeout)},
	{ErrStepFailed, answer(wire.FailBrokerStepFailed)},
	{ErrBusy, answer(wire.FailBrokerBusy)},
	{ErrGrantRefused, answer(wire.FailBrokerGrantRefused)},
	{ErrCaptureFailed, answer(wire.FailBrokerCaptureFailed)},
	{ErrClosed, answer(wire.FailBrokerClosed)},
}

// internalError is what a client sees of any error not in errorTable.
var internalError = answer(wire.FailBrokerInternal)

// The answers of a request no route takes: not errors of an operation, so not in
// errorTable, but rows of the failure table all the same.
var (
	errMethod  = answer(wire.FailBrokerMethodNotAllowed)
	errNoRoute = answer(wire.FailBrokerNoRoute)
)

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
