package channel

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/wire"
)

const testRequestID = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// A relay's failure is named by the worker (its data.reason, or the code an older
// worker sends), or by what this replica saw of the channel; always a wire reason.
func TestViewReason(t *testing.T) {
	rpc := func(code int, reason string) *jsonrpc.Error {
		e := &jsonrpc.Error{Code: code, Message: "m"}
		if reason != "" {
			e.Data = &jsonrpc.ErrorData{Reason: reason}
		}
		return e
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"method not found", rpc(wire.RPCMethodNotFound, ""), wire.ReasonUnsupported},
		{"busy", rpc(wire.RPCBusy, ""), wire.ReasonBusy},
		{"refused", rpc(wire.RPCRefused, ""), wire.ReasonRefused},
		{"unavailable", rpc(wire.RPCUnavailable, ""), wire.ReasonCapture},
		{"invalid params", rpc(wire.RPCInvalidParams, ""), wire.ReasonBadRequest},
		{"tool failed", rpc(wire.RPCToolFailed, ""), wire.ReasonFailed},
		{"internal", rpc(wire.RPCInternal, ""), wire.ReasonFailed},
		{"parse error", rpc(wire.RPCParseError, ""), wire.ReasonFailed},
		{"invalid request", rpc(wire.RPCInvalidRequest, ""), wire.ReasonFailed},
		{"made-up code", rpc(12345, ""), wire.ReasonFailed},
		{"data names broker_down", rpc(wire.RPCUnavailable, wire.ReasonBrokerDown), wire.ReasonBrokerDown},
		{"data wins over the code", rpc(wire.RPCBusy, wire.ReasonTimeout), wire.ReasonTimeout},
		{"unknown data falls back to the code", rpc(wire.RPCRefused, "user:alice"), wire.ReasonRefused},
		{"empty data falls back to the code", &jsonrpc.Error{Code: wire.RPCBusy, Data: &jsonrpc.ErrorData{}}, wire.ReasonBusy},
		{"wrapped rpc error", fmt.Errorf("call: %w", rpc(wire.RPCUnavailable, wire.ReasonCapture)), wire.ReasonCapture},
		{"deadline", context.DeadlineExceeded, wire.ReasonTimeout},
		{"wrapped deadline", fmt.Errorf("relay: %w", context.DeadlineExceeded), wire.ReasonTimeout},
		{"connection closed", errConnClosed, wire.ReasonNoChannel},
		{"wrapped connection closed", fmt.Errorf("relay: %w", errConnClosed), wire.ReasonNoChannel},
		{"canceled", context.Canceled, wire.ReasonFailed},
		{"unknown error", errors.New("write tcp: broken pipe"), wire.ReasonFailed},
	}
	for _, r := range wire.Reasons() {
		tests = append(tests, struct {
			name string
			err  error
			want string
		}{"data " + r, rpc(wire.RPCCodeOf(r), r), r})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := viewReason(tt.err)
			if got != tt.want {
				t.Errorf("viewReason(%v) = %q, want %q", tt.err, got, tt.want)
			}
			if !wire.IsReason(got) {
				t.Errorf("viewReason(%v) = %q, not a wire reason", tt.err, got)
			}
		})
	}
}

// toolCall builds the NATS payload of a tool call sealed to owner, as CallTool does.
type toolCall struct {
	requestID string
	replyKey  string
	plain     string
	seal      func(recipient *ecdh.PublicKey, requestID string, plain []byte) (envelope.Envelope, error)
}

func (c toolCall) payload(t *testing.T, owner *ecdh.PublicKey) []byte {
	t.Helper()
	seal := c.seal
	if seal == nil {
		seal = func(r *ecdh.PublicKey, id string, p []byte) (envelope.Envelope, error) {
			return envelope.SealToolCall(rand.Reader, r, id, p)
		}
	}
	env, err := seal(owner, c.requestID, []byte(c.plain))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(toolRequest{RequestID: c.requestID, ReplyKey: c.replyKey, Envelope: env})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A tool call opens only when it is a bounded toolRequest sealed to this replica's key
// as a tool call, with a valid reply key and a named tool; each refusal says which rule
// it broke in a fixed text (it is sent to the requester).
func TestOpenToolRequest(t *testing.T) {
	owner, err := envelope.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, err := envelope.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := envelope.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	good := toolCall{requestID: testRequestID, replyKey: envelope.PublicKeyHex(reply), plain: `{"name":"browser_open","arguments":{"url":"https://example.com/"}}`}
	with := func(f func(*toolCall)) toolCall { c := good; f(&c); return c }
	goodBytes := good.payload(t, owner.PublicKey())

	const (
		malformed = "malformed tool call"
		noOpen    = "tool call does not open"
		badReply  = "bad reply key"
		badCall   = `tool call must be {"name","arguments"}`
	)
	tests := []struct {
		name    string
		data    []byte
		wantErr string
	}{
		{name: "good", data: goodBytes},
		{name: "malformed json", data: []byte(`{"requestId":`), wantErr: malformed},
		{name: "not an object", data: []byte(`[]`), wantErr: malformed},
		{name: "empty", data: nil, wantErr: malformed},
		{name: "oversize", data: append(append([]byte{}, goodBytes...), []byte(strings.Repeat(" ", MaxToolRequest))...), wantErr: malformed},
		{name: "sealed to another replica", data: good.payload(t, other.PublicKey()), wantErr: noOpen},
		{name: "sealed as a frame", data: with(func(c *toolCall) {
			c.seal = func(r *ecdh.PublicKey, id string, p []byte) (envelope.Envelope, error) {
				return envelope.Seal(rand.Reader, r, id, p)
			}
		}).payload(t, owner.PublicKey()), wantErr: noOpen},
		{name: "request id swapped", data: func() []byte {
			var req toolRequest
			if err := json.Unmarshal(goodBytes, &req); err != nil {
				t.Fatal(err)
			}
			req.RequestID = strings.Repeat("ab", 32)
			b, _ := json.Marshal(req)
			return b
		}(), wantErr: noOpen},
		{name: "no envelope", data: []byte(`{"requestId":"` + testRequestID + `","replyKey":"` + good.replyKey + `"}`), wantErr: noOpen},
		{name: "bad reply key", data: with(func(c *toolCall) { c.replyKey = "04zz" }).payload(t, owner.PublicKey()), wantErr: badReply},
		{name: "compressed reply key", data: with(func(c *toolCall) { c.replyKey = "02" + c.replyKey[2:66] }).payload(t, owner.PublicKey()), wantErr: badReply},
		{name: "no reply key", data: with(func(c *toolCall) { c.replyKey = "" }).payload(t, owner.PublicKey()), wantErr: badReply},
		{name: "missing name", data: with(func(c *toolCall) { c.plain = `{"arguments":{}}` }).payload(t, owner.PublicKey()), wantErr: badCall},
		{name: "name too long", data: with(func(c *toolCall) { c.plain = `{"name":"` + strings.Repeat("a", 65) + `"}` }).payload(t, owner.PublicKey()), wantErr: badCall},
		{name: "plaintext not json", data: with(func(c *toolCall) { c.plain = `browser_open` }).payload(t, owner.PublicKey()), wantErr: badCall},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, p, replyKey, err := openToolRequest(owner, tt.data)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("openToolRequest = %v, want %q", err, tt.wantErr)
				}
				if replyKey != nil {
					t.Fatalf("a refused call returned a reply key")
				}
				return
			}
			if err != nil {
				t.Fatalf("openToolRequest = %v", err)
			}
			if req.RequestID != testRequestID || p.Name != "browser_open" || string(p.Arguments) != `{"url":"https://example.com/"}` {
				t.Errorf("opened %+v %+v", req, p)
			}
			if replyKey == nil || !replyKey.Equal(reply.PublicKey()) {
				t.Errorf("reply key %v, want the requester's", replyKey)
			}
		})
	}
}
