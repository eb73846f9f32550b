// Package jsonrpc holds the JSON-RPC 2.0 messages of the worker tool channel and a strict
// reader for them. Both ends — the API replica and the worker — use it.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/agentfy/agentfy/wire"
)

// Version is the only protocol version accepted.
const Version = "2.0"

// MaxMessage bounds one message on the channel: a sealed frame of a 1280×2000 viewport
// with its base64 and JSON overhead stays well below it.
const MaxMessage = 8 << 20 // 8 MiB

// Methods of the tool channel.
const (
	// MethodHello is the worker's first request: its image tag, bootstrap revision and
	// features.
	MethodHello = "agentfy/hello"
	// MethodToolsCall asks the worker to run one tool.
	MethodToolsCall = "tools/call"
	// MethodView asks the worker to relay a view request id to its broker. It is
	// not a tool: it never passes through tool routing.
	MethodView = "agentfy/browserView"
)

// Error is a JSON-RPC error object. Its Code is one of the channel's codes, which are
// all in package wire (wire.RPCParseError … wire.RPCRefused), beside the failure table
// that names the code each view reason travels under.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	// Data, JSON-RPC's optional error member, carries the wire reason of a failed
	// view (wire.Reason*) from the worker to the replica unchanged.
	Data *ErrorData `json:"data,omitempty"`
}

// ErrorData is the data member of an error.
type ErrorData struct {
	Reason string `json:"reason"`
}

// ReasonOf is the wire reason of a view's error answer: the one its data names, or, from
// a worker that names none (an older image), the one its code stands for (the reasons'
// table, wire.ReasonOfRPCCode). It is always one of wire.Reasons.
func ReasonOf(e *Error) string {
	var named string
	if e.Data != nil {
		named = e.Data.Reason
	}
	return wire.ReasonOr(named, wire.ReasonOfRPCCode(e.Code))
}

func (e *Error) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// Message is any JSON-RPC message: a request (Method set, ID set), a notification
// (Method set, no ID) or a response (Result or Error, ID set). Params and Result stay raw
// so a relay can pass an envelope through without decoding it.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      *uint64         `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// IsRequest reports whether m is a request expecting a response.
func (m *Message) IsRequest() bool { return m.Method != "" && m.ID != nil }

// IsResponse reports whether m answers a request.
func (m *Message) IsResponse() bool { return m.Method == "" && m.ID != nil }

// ErrInvalid is returned by Parse for anything that is not one well-formed message.
var ErrInvalid = errors.New("jsonrpc: invalid message")

// Parse decodes exactly one message and checks its form: version "2.0"; a request has a
// method and no result/error; a response has an id and exactly one of result and error.
// Batches, unknown or repeated members and trailing data are rejected
// (wire.DecodeStrict).
func Parse(b []byte) (*Message, error) {
	if len(b) > MaxMessage {
		return nil, fmt.Errorf("%w: too large", ErrInvalid)
	}
	var m Message
	if err := wire.DecodeStrict(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if m.JSONRPC != Version {
		return nil, fmt.Errorf("%w: version", ErrInvalid)
	}
	hasResult, hasError := len(m.Result) > 0, m.Error != nil
	switch {
	case m.Method != "":
		if hasResult || hasError {
			return nil, fmt.Errorf("%w: request with result", ErrInvalid)
		}
	case m.ID == nil:
		return nil, fmt.Errorf("%w: neither request nor response", ErrInvalid)
	case hasResult == hasError:
		return nil, fmt.Errorf("%w: response needs exactly one of result and error", ErrInvalid)
	}
	return &m, nil
}

// NewRequest builds a request.
func NewRequest(id uint64, method string, params any) ([]byte, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	return json.Marshal(Message{JSONRPC: Version, ID: &id, Method: method, Params: p})
}

// NewResult builds a success response; result is sent as it is (already JSON).
func NewResult(id uint64, result json.RawMessage) ([]byte, error) {
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	return json.Marshal(Message{JSONRPC: Version, ID: &id, Result: result})
}

// NewRawResult builds a success response around result without re-encoding it: a relay
// passing a sealed envelope on (tens of KB of base64) spares a full validate-and-compact
// pass. result must be one JSON value; the receiver's Parse rejects anything else.
func NewRawResult(id uint64, result []byte) []byte {
	result = bytes.TrimSpace(result)
	if len(result) == 0 {
		result = []byte("null")
	}
	b := make([]byte, 0, len(result)+48)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}

// NewError builds an error response.
func NewError(id uint64, code int, message string) ([]byte, error) {
	return json.Marshal(Message{JSONRPC: Version, ID: &id, Error: &Error{Code: code, Message: message}})
}

// NewViewError builds the error answer of a view request: reason (one of wire.Reasons)
// in the data member and the code that stands for it.
func NewViewError(id uint64, reason, message string) []byte {
	reason = wire.Reason(reason)
	b, _ := json.Marshal(Message{JSONRPC: Version, ID: &id, Error: &Error{Code: wire.RPCCodeOf(reason), Message: message, Data: &ErrorData{Reason: reason}}})
	return b // a Message of strings and numbers always marshals
}

// Bounds of the worker's hello. A replica reads the hello with MaxHelloBytes as the
// socket's read limit and refuses one whose fields break the others.
const (
	MaxHelloBytes    = 4 << 10 // 4 KiB, the whole JSON-RPC message
	MaxImageTagBytes = 256
	MaxFeatures      = 16
	MaxFeatureBytes  = 64
)

// ValidHello reports why p is not an acceptable hello: the bootstrap revision, an
// image tag longer than MaxImageTagBytes or with characters outside printable ASCII,
// more than MaxFeatures features, or one that is empty, longer than
// MaxFeatureBytes or not a plain token. It returns "" for a good hello.
func ValidHello(p HelloParams) string {
	switch {
	case p.BootstrapRevision != wire.BootstrapRevision:
		return "unsupported bootstrap revision"
	case len(p.ImageTag) > MaxImageTagBytes || !printable(p.ImageTag):
		return "bad image tag"
	case len(p.Features) > MaxFeatures:
		return "too many capabilities"
	}
	for _, c := range p.Features {
		if c == "" || len(c) > MaxFeatureBytes || !token(c) {
			return "bad capability"
		}
	}
	return ""
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func token(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// HelloParams is the worker's hello.
type HelloParams struct {
	ImageTag          string   `json:"imageTag"`
	BootstrapRevision int      `json:"bootstrapRevision"`
	Features          []string `json:"capabilities"`
}

// HelloResult answers the hello.
type HelloResult struct {
	SessionID string `json:"sessionId"`
}

// ToolCallParams asks for one tool call.
type ToolCallParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// ViewParams carries only the request id — nothing the worker could use to read or
// forge the frame — and, when the view is traced, its trace context in _meta.
type ViewParams struct {
	RequestID string `json:"requestId"`
	Meta      *Meta  `json:"_meta,omitempty"`
}
