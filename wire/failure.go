package wire

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"
)

// Failure names one row of the failure table: one answer that one or more of Agentfy's
// listeners give a request they cannot serve. Each listener looks its answers up here by
// key — its status, its error body's code and message, the reason a 503 is logged and
// counted under, its Retry-After — and decides none of them itself, so a new answer is
// one row (and its key), and the operators' documents are checked against the rows
// (docs/operating.md, deploy/prometheus/alerts.yml).
type Failure uint8

// Listener is one of the places a request can be refused at; a set of them is their
// bits together (ListenerPublic | ListenerStatus).
type Listener uint8

// The listeners. The consume route, the worker channel and the status feed are routes
// of the public listener, each with callers of its own (brokers, workers, the web app),
// so each counts as a listener here.
const (
	// ListenerPublic is a replica's public API (AGENTFY_LISTEN): the view routes, the
	// agents' list, and every path and method no route takes.
	ListenerPublic Listener = 1 << iota
	// ListenerAdmin is a replica's admin API (AGENTFY_ADMIN_LISTEN).
	ListenerAdmin
	// ListenerConsume is the route a broker redeems a view's grant at (ConsumePath).
	ListenerConsume
	// ListenerChannel is the worker tool channel's refusals before the WebSocket upgrade
	// (ChannelPath).
	ListenerChannel
	// ListenerStatus is the status feed (GET /v1/agents/:id/worker/status).
	ListenerStatus
	// ListenerMetrics is a replica's metrics listener (AGENTFY_METRICS_LISTEN).
	ListenerMetrics
	// ListenerBroker is the broker's socket (SocketName): /observe and the tools.
	ListenerBroker
	// ListenerBrokerMetrics is a broker's metrics listener (AGENTFY_METRICS_ADDR).
	ListenerBrokerMetrics
)

// listenerNames are the listeners' names in the documents, in their order.
var listenerNames = []struct {
	l    Listener
	name string
}{
	{ListenerPublic, "public"}, {ListenerAdmin, "admin"}, {ListenerConsume, "consume"}, {ListenerChannel, "channel"},
	{ListenerStatus, "status feed"}, {ListenerMetrics, "metrics"}, {ListenerBroker, "broker"},
	{ListenerBrokerMetrics, "broker metrics"},
}

// Names returns the names of the listeners in l ("public", "admin", "consume",
// "channel", "status feed", "metrics", "broker", "broker metrics"), in that order.
func (l Listener) Names() []string {
	var out []string
	for _, n := range listenerNames {
		if l&n.l != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// AllListeners returns every listener, one bit each, in the order of Names.
func AllListeners() []Listener {
	out := make([]Listener, len(listenerNames))
	for i, n := range listenerNames {
		out[i] = n.l
	}
	return out
}

// FailureRow is one row of the failure table.
type FailureRow struct {
	// Listeners is the set of the listeners that answer with this row.
	Listeners Listener
	// Status is the HTTP status of the answer.
	Status int
	// Code is the error body's code (ErrorBody): what a client branches on. The
	// broker's code for a view's failure is its reason, which the worker passes on.
	Code string
	// Message is the error body's plain message, never an internal error's text. The
	// admin API's invalid and missing rows name the field at fault instead, and the
	// broker's refused address the rule and host.
	Message string
	// Reason is why a 503 (or a broker's refusal of a view) failed, one of Labels: the
	// value of the reason in the log line, the span, the audit event and
	// agentfy_view_unavailable_total. "" for an answer that is no failure of the
	// deployment's (a refusal of the caller).
	Reason string
	// Crosses says whether Reason crosses processes: named by the hop that knew it and
	// passed on by every later one (Reasons). A reason that does not is raised by the
	// process that answers, about itself, and one that arrives from another process is
	// read as ReasonFailed.
	Crosses bool
	// RetryAfter is the answer's Retry-After header, in whole seconds; 0: none. A view's
	// rate_limited says the time really left of the caller's own pace instead, when
	// that is what refused it.
	RetryAfter time.Duration
	// RPC is the JSON-RPC code a worker's error answer carries Reason under (its data
	// names the reason itself; the code is for a replica that reads codes alone), on
	// the replica's row of each reason that crosses; 0 elsewhere.
	RPC int
	// RPCAlone says whether RPC alone stands for Reason (an older worker's answer that
	// names no reason).
	RPCAlone bool
}

// Body is the row's error body.
func (r FailureRow) Body() ErrorBody {
	return ErrorBody{Error: ErrorDetail{Code: r.Code, Message: r.Message}}
}

// The failure table's keys. The first rows are the replica's answers to a view that
// failed, one per reason (those that cross processes first): the rows that define the
// reasons, their order that of Reasons and Labels.
const (
	_ Failure = iota

	FailViewNoChannel
	FailViewUnsupported
	FailViewBusy
	FailViewRefused
	FailViewCapture
	FailViewBrokerDown
	FailViewBrokerError
	FailViewBadRequest
	FailViewTimeout
	FailViewInvalid
	FailViewFailed

	FailIdentityUnavailable
	FailViewPendingLimit
	FailViewNotDurable
	// FailInternal is a replica's own Redis or NATS failing, or the status feed's cap on
	// its streams (feed.MaxListeners) reached, on any route of the public listener.
	FailInternal
	FailViewAuditUnavailable

	// The public API's refusals, and the listeners that share them.
	FailUnauthenticated
	FailForbidden
	FailAgentNotFound
	FailRateLimited
	FailBadRequest
	FailGrantNotFound
	FailTooManyStreams
	FailNoRoute
	FailMethodNotAllowed
	FailUnsupportedMediaType
	FailPanic
	FailTwoCredentials
	FailEncodedSlash

	// The admin API's own.
	FailAdminOnly
	FailAdminTooLarge
	FailAdminNoRoute
	FailAdminNotFound
	FailAdminUnreadable
	FailAdminNotAnObject
	FailAdminInvalid
	FailAdminMissing
	FailDirectoryUnavailable

	// The worker channel's, before the upgrade.
	FailChannelUnauthenticated
	FailChannelForbidden
	FailChannelSessionEnded
	FailChannelUnavailable
	// The channel's refusals of a handshake that is no WebSocket's, by the status the
	// WebSocket library refuses it with.
	FailChannelUpgradeRequired
	FailChannelBadHandshake
	FailChannelCrossOrigin
	FailChannelNotUpgradable

	// The broker's.
	FailBrokerBadBody
	FailBrokerBodyTooLarge
	FailBrokerBadRequestID
	FailBrokerBadURL
	FailBrokerRefusedAddress
	FailBrokerBadStep
	FailBrokerUnknownTab
	FailBrokerTooManyTabs
	FailBrokerQueueFull
	FailBrokerToolTimeout
	FailBrokerStepFailed
	FailBrokerBusy
	FailBrokerGrantRefused
	FailBrokerCaptureFailed
	FailBrokerClosed
	FailBrokerInternal
	FailBrokerMethodNotAllowed
	FailBrokerNoRoute

	failureCount
)

// viewUnavailable is the one message of a view's failure: the reason is for operators.
const viewUnavailable = "the browser view is temporarily unavailable; retry later"

// failures is the failure table, one row a key.
var failures = [failureCount]FailureRow{
	// A view's failure, by reason: one body for all but identity_unavailable.
	FailViewNoChannel:   {Listeners: ListenerPublic, Status: http.StatusServiceUnavailable, Code: "unavailable", Message: viewUnavailable, Reason: ReasonNoChannel, Crosses: true, RPC: RPCUnavailable},
	FailViewUnsupported: {Listeners: ListenerPublic, Status: http.StatusServiceUnavailable, Code: "unavailable", Message: viewUnavailable, Reason: ReasonUnsupported, Crosses: true, RPC: RPCMethodNotFound, RPCAlone: true},
	FailViewBusy:        {Listeners: ListenerPublic, Status: http.StatusServiceUnavailable, Code: "unavailable", Message: viewUnavailable, Reason: ReasonBusy, Crosses: true, RPC: RPCBusy, RPCAlone: true},
	FailViewRefused:     {Listeners: ListenerPublic, Status: http.StatusServiceUnavailable, Code: "unavailable", Message: viewUnavailable, Reason: ReasonRefused, Crosses: true, RPC: RPCRefused, RPCAlone: true},
	FailViewCapture:     {Listeners: ListenerPublic, Status: http.StatusServiceUnavailable, Code: "unavailable", Message: viewUnavailable, Reason: ReasonCapture, Crosses: true, RPC: RPCUnavailable, RPCAlone: true},
	FailViewBrokerDown:  {Listeners: ListenerPublic, Status: http.StatusServiceUnavailable, Code: "unavailable", Message: viewUnavailable, Reason: ReasonBrokerDown, Crosses: true, RPC: RPCUnavailable},
	FailViewBrokerError: {Listeners: ListenerPublic, Status: http.StatusServiceUnavailable, Code: "unavailable", Message: viewUnavailable, Reason: ReasonBrokerError, Crosses: true, RPC: RPCUnavailable},
	FailViewBadRequest:  {Listeners: ListenerPublic, Status: http.StatusServiceUnavailable, Code: "unavailable", Message: viewUnavailable, Reason: ReasonBadRequest, Crosses: true, RPC: RPCInvalidParams, RPCAlone: true},
	FailViewTimeout:     {Listeners: ListenerPublic, Status: http.StatusServiceUnavailable, Code: "unavailable", Message: viewUnavailable, Reason: ReasonTimeout, Crosses: true, RPC: RPCUnavailable},
	FailViewInvalid:     {Listeners: ListenerPublic, Status: http.StatusServiceUnavailable, Code: "unavailable", Message: viewUnavailable, Reason: ReasonInvalid, Crosses: true, RPC: RPCUnavailable},
	FailViewFailed:      {Listeners: ListenerPublic, Status: http.StatusServiceUnavailable, Code: "unavailable", Message: viewUnavailable, Reason: ReasonFailed, Crosses: true, RPC: RPCUnavailable},
	// identity_unavailable is raised at the edge, by the replica the token reached, on
	// any route that takes a human token: its code tells a client not to sign out, and
	// its Retry-After is a client's polling interval (the SDK's pollIntervalMs), since
	// the provider's return is not known.
	FailIdentityUnavailable:  {Listeners: ListenerPublic | ListenerStatus, Status: http.StatusServiceUnavailable, Code: ReasonIdentityUnavailable, Message: "the sign-in service is not answering; retry later (this is not a sign-out)", Reason: ReasonIdentityUnavailable, RetryAfter: 5 * time.Second},
	FailViewPendingLimit:     {Listeners: ListenerPublic, Status: http.StatusServiceUnavailable, Code: "unavailable", Message: viewUnavailable, Reason: ReasonInFlightLimit},
	FailViewNotDurable:       {Listeners: ListenerPublic, Status: http.StatusServiceUnavailable, Code: "unavailable", Message: viewUnavailable, Reason: ReasonNotDurable},
	FailInternal:             {Listeners: ListenerPublic | ListenerConsume | ListenerStatus, Status: http.StatusServiceUnavailable, Code: "unavailable", Message: viewUnavailable, Reason: ReasonInternal},
	FailViewAuditUnavailable: {Listeners: ListenerPublic, Status: http.StatusServiceUnavailable, Code: "unavailable", Message: viewUnavailable, Reason: ReasonAuditUnavailable},

	FailUnauthenticated: {Listeners: ListenerPublic | ListenerAdmin | ListenerConsume | ListenerStatus, Status: http.StatusUnauthorized, Code: "unauthenticated", Message: "a valid bearer credential is required"},
	FailForbidden:       {Listeners: ListenerPublic | ListenerConsume | ListenerStatus, Status: http.StatusForbidden, Code: "forbidden", Message: "this credential may not do that"},
	FailAgentNotFound:   {Listeners: ListenerPublic | ListenerStatus, Status: http.StatusNotFound, Code: "not_found", Message: "agent not found"},
	// rate_limited's Retry-After is the gate's window (view.GateWindow, as the message
	// says), or what is left of the caller's own pace.
	FailRateLimited:          {Listeners: ListenerPublic, Status: http.StatusTooManyRequests, Code: "rate_limited", Message: "one view per agent every 2 seconds; retry later", RetryAfter: 2 * time.Second},
	FailBadRequest:           {Listeners: ListenerConsume, Status: http.StatusBadRequest, Code: "bad_request", Message: "the request body is not valid"},
	FailGrantNotFound:        {Listeners: ListenerConsume, Status: http.StatusNotFound, Code: "not_found", Message: "capability not found"},
	FailTooManyStreams:       {Listeners: ListenerStatus, Status: http.StatusTooManyRequests, Code: "too_many_streams", Message: "this user holds too many status streams; close one", RetryAfter: 2 * time.Second},
	FailNoRoute:              {Listeners: ListenerPublic | ListenerMetrics, Status: http.StatusNotFound, Code: "not_found", Message: "no such route"},
	FailMethodNotAllowed:     {Listeners: ListenerPublic | ListenerAdmin | ListenerMetrics | ListenerChannel, Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: "this route does not take that method"},
	FailUnsupportedMediaType: {Listeners: ListenerConsume | ListenerAdmin, Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type", Message: "send application/json"},
	FailPanic:                {Listeners: ListenerPublic | ListenerAdmin | ListenerMetrics | ListenerChannel, Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"},
	// Requests that could be read two ways, refused before any route's handler runs.
	FailTwoCredentials: {Listeners: ListenerPublic | ListenerAdmin | ListenerChannel, Status: http.StatusBadRequest, Code: "bad_request", Message: "send one Authorization header: a request with two is ambiguous"},
	FailEncodedSlash:   {Listeners: ListenerPublic | ListenerAdmin, Status: http.StatusBadRequest, Code: "bad_request", Message: "an id never contains '/': the path has an encoded slash (%2F)"},

	FailAdminOnly:            {Listeners: ListenerAdmin, Status: http.StatusForbidden, Code: "forbidden", Message: "the admin API takes admin keys only"},
	FailAdminTooLarge:        {Listeners: ListenerAdmin, Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: "the body is larger than 1048576 bytes"},
	FailAdminNoRoute:         {Listeners: ListenerAdmin, Status: http.StatusNotFound, Code: "not_found", Message: "no such admin route"},
	FailAdminNotFound:        {Listeners: ListenerAdmin, Status: http.StatusNotFound, Code: "not_found", Message: "not found"},
	FailAdminUnreadable:      {Listeners: ListenerAdmin, Status: http.StatusBadRequest, Code: "bad_request", Message: "the body could not be read"},
	FailAdminNotAnObject:     {Listeners: ListenerAdmin, Status: http.StatusBadRequest, Code: "bad_request", Message: "the body is not one JSON object of valid UTF-8"},
	FailAdminInvalid:         {Listeners: ListenerAdmin, Status: http.StatusBadRequest, Code: "invalid", Message: "a field of the body is refused"},
	FailAdminMissing:         {Listeners: ListenerAdmin, Status: http.StatusNotFound, Code: "not_found", Message: "the change names something that is not there"},
	FailDirectoryUnavailable: {Listeners: ListenerAdmin, Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the directory is unavailable; retry later", Reason: ReasonInternal},

	// A 401 sends a worker home for good (its session ended); a 503 it retries.
	FailChannelUnauthenticated: {Listeners: ListenerChannel, Status: http.StatusUnauthorized, Code: "unauthenticated", Message: "a worker pass is required"},
	FailChannelForbidden:       {Listeners: ListenerChannel, Status: http.StatusForbidden, Code: "forbidden", Message: "the worker channel takes worker passes only"},
	FailChannelSessionEnded:    {Listeners: ListenerChannel, Status: http.StatusUnauthorized, Code: "unauthenticated", Message: "the session is not live"},
	FailChannelUnavailable:     {Listeners: ListenerChannel, Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the session store is unavailable; retry later", Reason: ReasonInternal},
	FailChannelUpgradeRequired: {Listeners: ListenerChannel, Status: http.StatusUpgradeRequired, Code: "upgrade_required", Message: "the worker channel is a WebSocket: send its handshake"},
	FailChannelBadHandshake:    {Listeners: ListenerChannel, Status: http.StatusBadRequest, Code: "bad_request", Message: "the WebSocket handshake is not valid"},
	FailChannelCrossOrigin:     {Listeners: ListenerChannel, Status: http.StatusForbidden, Code: "forbidden", Message: "the worker channel takes no handshake from another origin"},
	FailChannelNotUpgradable:   {Listeners: ListenerChannel, Status: http.StatusNotImplemented, Code: "not_implemented", Message: "this connection cannot become a WebSocket (HTTP/1.1 only)"},

	// The broker's: a view's failure is answered with its reason as the code, which the
	// worker passes on unchanged; the tool routes' and the body bound's codes are no
	// reasons (a worker passes any of them on as broker_error).
	FailBrokerBadBody:          {Listeners: ListenerBroker, Status: http.StatusBadRequest, Code: ReasonBadRequest, Message: "the request body is not valid JSON of the expected shape", Reason: ReasonBadRequest, Crosses: true},
	FailBrokerBodyTooLarge:     {Listeners: ListenerBroker, Status: http.StatusRequestEntityTooLarge, Code: "body_too_large", Message: "the request body is too large"},
	FailBrokerBadRequestID:     {Listeners: ListenerBroker, Status: http.StatusBadRequest, Code: ReasonBadRequest, Message: "requestId must be 64 lowercase hex digits", Reason: ReasonBadRequest, Crosses: true},
	FailBrokerBadURL:           {Listeners: ListenerBroker, Status: http.StatusBadRequest, Code: "bad_url", Message: "the url must be an http or https URL, or about:blank"},
	FailBrokerRefusedAddress:   {Listeners: ListenerBroker, Status: http.StatusForbidden, Code: "refused_address", Message: "the url's host is an address of the deployment's own network or a metadata service, which the agent's browser may not reach"},
	FailBrokerBadStep:          {Listeners: ListenerBroker, Status: http.StatusBadRequest, Code: "bad_step", Message: "a step is unknown or malformed"},
	FailBrokerUnknownTab:       {Listeners: ListenerBroker, Status: http.StatusNotFound, Code: "unknown_tab", Message: "no open tab has this id"},
	FailBrokerTooManyTabs:      {Listeners: ListenerBroker, Status: http.StatusConflict, Code: "too_many_tabs", Message: "too many tabs are open"},
	FailBrokerQueueFull:        {Listeners: ListenerBroker, Status: http.StatusTooManyRequests, Code: "queue_full", Message: "too many browser tool calls are waiting"},
	FailBrokerToolTimeout:      {Listeners: ListenerBroker, Status: http.StatusGatewayTimeout, Code: "tool_timeout", Message: "the browser tool call did not finish in time"},
	FailBrokerStepFailed:       {Listeners: ListenerBroker, Status: http.StatusUnprocessableEntity, Code: "step_failed", Message: "the browser could not perform a step"},
	FailBrokerBusy:             {Listeners: ListenerBroker, Status: http.StatusConflict, Code: ReasonBusy, Message: "another capture is in progress", Reason: ReasonBusy, Crosses: true},
	FailBrokerGrantRefused:     {Listeners: ListenerBroker, Status: http.StatusBadGateway, Code: ReasonRefused, Message: "the grant was refused", Reason: ReasonRefused, Crosses: true},
	FailBrokerCaptureFailed:    {Listeners: ListenerBroker, Status: http.StatusServiceUnavailable, Code: ReasonCapture, Message: "the browser could not be captured in time", Reason: ReasonCapture, Crosses: true},
	FailBrokerClosed:           {Listeners: ListenerBroker, Status: http.StatusServiceUnavailable, Code: ReasonBrokerDown, Message: "the broker is shutting down", Reason: ReasonBrokerDown, Crosses: true},
	FailBrokerInternal:         {Listeners: ListenerBroker, Status: http.StatusInternalServerError, Code: ReasonBrokerError, Message: "internal error", Reason: ReasonBrokerError, Crosses: true},
	FailBrokerMethodNotAllowed: {Listeners: ListenerBroker | ListenerBrokerMetrics, Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: "method not allowed"},
	FailBrokerNoRoute:          {Listeners: ListenerBroker | ListenerBrokerMetrics, Status: http.StatusNotFound, Code: "not_found", Message: "no such route"},
}

// Row is f's row of the failure table (FailPanic's for a key that is none).
func (f Failure) Row() FailureRow {
	if f == 0 || f >= failureCount {
		return failures[FailPanic]
	}
	return failures[f]
}

// Failures returns every key of the failure table, in its order.
func Failures() []Failure {
	out := make([]Failure, 0, failureCount-1)
	for f := Failure(1); f < failureCount; f++ {
		out = append(out, f)
	}
	return out
}

// WriteFailure answers f on w: its row's status, Retry-After and error body, as JSON,
// never stored. The listeners that are plain net/http handlers (the worker channel's
// refusals, a broker's metrics listener) answer with it; gin's render the same body.
func WriteFailure(w http.ResponseWriter, f Failure) {
	r := f.Row()
	body, _ := json.Marshal(r.Body()) // two strings always marshal
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if r.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(r.RetryAfter/time.Second)))
	}
	w.WriteHeader(r.Status)
	_, _ = w.Write(body)
}
