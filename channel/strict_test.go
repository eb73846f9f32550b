package channel

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentfy/agentfy/envelope"
)

// TestChannelRefusesAmbiguousMembers: the channel's bodies from other processes — a
// sealed tool call from the bus and the call inside it, the owner's sealed result, the
// worker's hello — are read with wire.DecodeStrict: a member given twice or in another
// case than the field's is refused, never taken for the field (encoding/json kept the
// last of two and matched names in any case).
func TestChannelRefusesAmbiguousMembers(t *testing.T) {
	owner, err := envelope.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := envelope.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	replyHex := envelope.PublicKeyHex(reply)
	const plain = `{"name":"browser_open","arguments":{"url":"https://example.com/"}}`
	call := func(plain string) toolCall {
		return toolCall{requestID: testRequestID, replyKey: replyHex, plain: plain}
	}
	// payload rewrites a good call's NATS payload with edit (on its JSON text).
	payload := func(edit func(string) string) []byte {
		return []byte(edit(string(call(plain).payload(t, owner.PublicKey()))))
	}
	// result seals a good result from the owner to the requester, its body rewritten
	// with edit.
	result := func(edit func(string) string) []byte {
		env, err := envelope.SealFrom(rand.Reader, owner, reply.PublicKey(), testRequestID, []byte(`{"tabId":"t1"}`))
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(envelope.Sealed{Envelope: env})
		if err != nil {
			t.Fatal(err)
		}
		return []byte(edit(string(b)))
	}
	same := func(s string) string { return s }
	const (
		toolPayload = "tool payload" // openToolRequest of data
		toolResult  = "tool result"  // openToolReply of data
		hello       = "hello"        // helloParams of data
	)
	tests := []struct {
		name    string
		kind    string
		data    []byte
		wantErr bool
	}{
		{name: "call as sent", kind: toolPayload, data: payload(same)},
		{name: "call with requestId twice", kind: toolPayload, data: payload(func(s string) string {
			return strings.Replace(s, `{"requestId":`, `{"requestId":"`+strings.Repeat("ab", 32)+`","requestId":`, 1)
		}), wantErr: true},
		{name: "call with ReplyKey", kind: toolPayload, data: payload(func(s string) string {
			return strings.Replace(s, `"replyKey"`, `"ReplyKey"`, 1)
		}), wantErr: true},
		{name: "call with envelope's iv twice", kind: toolPayload, data: payload(func(s string) string {
			return strings.Replace(s, `"iv":`, `"iv":"00","iv":`, 1)
		}), wantErr: true},
		{name: "plaintext with name twice", kind: toolPayload, data: call(`{"name":"browser_tabs","name":"browser_open","arguments":{}}`).payload(t, owner.PublicKey()), wantErr: true},
		{name: "plaintext with Name", kind: toolPayload, data: call(`{"Name":"browser_open","arguments":{}}`).payload(t, owner.PublicKey()), wantErr: true},
		{name: "plaintext with Arguments", kind: toolPayload, data: call(`{"name":"browser_open","Arguments":{}}`).payload(t, owner.PublicKey()), wantErr: true},
		{name: "result as sealed", kind: toolResult, data: result(same)},
		{name: "result with envelope twice", kind: toolResult, data: result(func(s string) string {
			return `{"envelope":{},` + s[1:]
		}), wantErr: true},
		{name: "result with Envelope", kind: toolResult, data: result(func(s string) string {
			return strings.Replace(s, `"envelope"`, `"Envelope"`, 1)
		}), wantErr: true},
		{name: "result with Ciphertext", kind: toolResult, data: result(func(s string) string {
			return strings.Replace(s, `"ciphertext"`, `"Ciphertext"`, 1)
		}), wantErr: true},
		{name: "hello as sent", kind: hello, data: []byte(`{"imageTag":"w:1","bootstrapRevision":2,"capabilities":["browserView"]}`)},
		{name: "hello with bootstrapRevision twice", kind: hello, data: []byte(`{"imageTag":"w:1","bootstrapRevision":1,"bootstrapRevision":2,"capabilities":[]}`), wantErr: true},
		{name: "hello with the tool list capitalised", kind: hello, data: []byte(`{"imageTag":"w:1","bootstrapRevision":2,"Capabilities":["browserView"]}`), wantErr: true},
		{name: "hello with imagetag", kind: hello, data: []byte(`{"imagetag":"w:1","bootstrapRevision":2,"capabilities":[]}`), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			switch tt.kind {
			case toolPayload:
				_, _, _, err = openToolRequest(owner, tt.data)
			case toolResult:
				_, err = openToolReply(reply, owner.PublicKey(), testRequestID, tt.data)
			case hello:
				if _, why := helloParams(tt.data); why != "" {
					err = errors.New(why)
				}
			}
			if (err != nil) != tt.wantErr {
				t.Fatalf("%s: err %v, wantErr %v", tt.data, err, tt.wantErr)
			}
		})
	}
}
