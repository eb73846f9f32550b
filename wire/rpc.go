package wire

// The JSON-RPC error codes of the worker tool channel, every one of them, in one place:
// the replica and the worker answer with these, package jsonrpc builds and reads the
// messages, and the failure table (failure.go) names the code each view reason travels
// under (FailureRow.RPC).
const (
	// RPCParseError: JSON-RPC's own, for a message that is not JSON.
	RPCParseError = -32700
	// RPCInvalidRequest: JSON-RPC's own, for JSON that is not a request.
	RPCInvalidRequest = -32600
	// RPCMethodNotFound: JSON-RPC's own, for a method the worker does not know.
	RPCMethodNotFound = -32601
	// RPCInvalidParams: JSON-RPC's own, for params that do not decode.
	RPCInvalidParams = -32602
	// RPCInternal: JSON-RPC's own, for a failure of the answering end itself.
	RPCInternal = -32603
	// RPCBusy: a bound was reached (too many views or tool calls in flight).
	RPCBusy = -32001
	// RPCUnavailable: the broker or browser could not serve the request.
	RPCUnavailable = -32002
	// RPCToolFailed: the tool ran and failed.
	RPCToolFailed = -32003
	// RPCRefused: the broker could not redeem the view's grant.
	RPCRefused = -32004
)
