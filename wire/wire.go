//go:generate go run ./internal/gendoc -doc ../docs/operating.md -reasons reason.go

// Package wire is the contract between Agentfy's processes, in one place that every end
// imports: the names on the worker tool channel and the broker socket, its JSON-RPC
// codes, the failure table — every listener's error answers and the reasons a view
// fails with — the limits and layout of a page and its validation, and the deadline
// budget of a view hop by hop. It imports the standard library and one JSON package
// (github.com/go-json-experiment/json, for DecodeStrict: every body between processes),
// so the worker and the broker can share it without linking anything of the API
// replica.
//
// Changing a value here changes the protocol between separately deployed processes: a
// new name or reason may be added; an existing one stays as it is.
//
// # Glossary
//
// The Go code names each thing of a view with one word. Some wire strings are older than
// these words and keep theirs, since other processes depend on them; the constant that
// holds such a string is named with the word below.
//
//   - view: one request for a frame of an agent's current tab, from GET …/worker/view to
//     the JPEG answer; also the requesting replica's whole part in it (package view).
//     On the tool channel a view is the JSON-RPC method "agentfy/browserView"
//     (jsonrpc.MethodView).
//   - relay: the owner replica's part, the replica that holds the worker's socket: it
//     checks the grant, paces the worker and passes the request id over the channel
//     (RelayTimeout); the worker relays it to its broker in turn.
//   - capture: the broker's part: it redeems the grant, takes one screenshot of the
//     selected tab, masks it and seals the page (broker.Broker.Capture), on the socket
//     route "/observe" (CapturePath) within BrokerCaptureTimeout.
//   - screenshot: the CDP calls of a capture that read the tab and its masks
//     (BrokerScreenshotTimeout).
//   - grant: the 10-second one-time record a requesting replica writes to Redis for one
//     view, which the broker redeems to learn the requester's public key (view.Grants);
//     the SPEC calls it a view capability, and so do the strings that are contracts:
//     ConsumePath, AGENTFY_CAPABILITY_KEY, agentfy_capability_forged_total.
//   - feature: an entry of the list a worker's hello announces, "capabilities" on the
//     wire (FeatureBrowserView).
//   - page: what a capture seals, the plaintext `null` or a Page; the frame is its JPEG.
package wire

import "slices"

// Names on the broker's socket and the tool channel.
const (
	// SocketName is the broker's socket in the IPC directory the worker and the broker
	// share (AGENTFY_IPC_DIR).
	SocketName = "browser.sock"
	// CapturePath is the broker's route for a view request id.
	CapturePath = "/observe"
	// ToolPathPrefix + a tool name is the broker's route for that tool.
	ToolPathPrefix = "/tools/"
	// ChannelPath is the replicas' WebSocket route of the worker tool channel.
	ChannelPath = "/v1/worker/channel"
	// ConsumePath is the replicas' route where a broker redeems a view grant.
	ConsumePath = "/v1/internal/worker-observations/consume"

	// FeatureBrowserView is what a worker's hello lists when its image can relay view
	// requests to a browser broker.
	FeatureBrowserView = "browserView"
	// BootstrapRevision is the worker bootstrap revision. It stays 2: the capture path
	// lives on the broker socket the worker already knows, so no bootstrap variable was
	// added.
	BootstrapRevision = 2
	// CloseSessionEnded is the WebSocket close code that ends a session for good, in
	// both directions: a replica closes with it when the session was stopped, and a
	// worker whose session ended closes with it. Any other close is a lost socket, which
	// never stops a session.
	CloseSessionEnded = 4000
)

// The broker's tools, the only names a tool call may carry.
const (
	ToolOpen  = "browser_open"
	ToolPlay  = "browser_play"
	ToolTabs  = "browser_tabs"
	ToolClose = "browser_close"
)

// tools lists every tool, in the order the broker documents them.
var tools = []string{ToolOpen, ToolPlay, ToolTabs, ToolClose}

// Tools returns every tool name.
func Tools() []string { return slices.Clone(tools) }

// IsTool reports whether name is one of the broker's tools.
func IsTool(name string) bool { return slices.Contains(tools, name) }

// ErrorBody is every error answer over HTTP — the API's to its clients and the broker's
// to its worker: {"error":{"code","message"}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is an error answer's code (a view's reason, for the broker's) and plain
// message.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
