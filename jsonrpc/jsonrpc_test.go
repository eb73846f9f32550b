package jsonrpc_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/wire"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantReq bool
		wantErr bool
	}{
		{name: "request", in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"browser_tabs"}}`, wantReq: true},
		{name: "result", in: `{"jsonrpc":"2.0","id":7,"result":{"envelope":{}}}`},
		{name: "null result", in: `{"jsonrpc":"2.0","id":7,"result":null}`},
		{name: "error", in: `{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}`},
		{name: "notification", in: `{"jsonrpc":"2.0","method":"ping"}`},
		{name: "wrong version", in: `{"jsonrpc":"1.0","id":1,"method":"x"}`, wantErr: true},
		{name: "batch", in: `[{"jsonrpc":"2.0","id":1,"method":"x"}]`, wantErr: true},
		{name: "unknown field", in: `{"jsonrpc":"2.0","id":1,"method":"x","extra":1}`, wantErr: true},
		{name: "trailing", in: `{"jsonrpc":"2.0","id":1,"method":"x"} {}`, wantErr: true},
		{name: "result and error", in: `{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":""}}`, wantErr: true},
		{name: "request with result", in: `{"jsonrpc":"2.0","id":1,"method":"x","result":1}`, wantErr: true},
		{name: "no id no method", in: `{"jsonrpc":"2.0","result":1}`, wantErr: true},
		{name: "negative id", in: `{"jsonrpc":"2.0","id":-1,"result":1}`, wantErr: true},
		{name: "string id", in: `{"jsonrpc":"2.0","id":"1","result":1}`, wantErr: true},
		{name: "not json", in: `{`, wantErr: true},
		// Parse reads with wire.DecodeStrict (issue 35): names exactly, each once.
		{name: "id twice", in: `{"jsonrpc":"2.0","id":1,"id":2,"result":1}`, wantErr: true},
		{name: "method twice", in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"agentfy/browserView"}`, wantErr: true},
		{name: "Method", in: `{"jsonrpc":"2.0","id":1,"Method":"tools/call"}`, wantErr: true},
		{name: "ID beside id", in: `{"jsonrpc":"2.0","id":1,"ID":2,"result":1}`, wantErr: true},
		{name: "error code twice", in: `{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"code":-32002,"message":"no"}}`, wantErr: true},
		{name: "error Data", in: `{"jsonrpc":"2.0","id":7,"error":{"code":-32002,"message":"no","Data":{"reason":"busy"}}}`, wantErr: true},
		{name: "error data reason twice", in: `{"jsonrpc":"2.0","id":7,"error":{"code":-32002,"message":"no","data":{"reason":"busy","reason":"capture"}}}`, wantErr: true},
		{name: "too large", in: `{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("a", jsonrpc.MaxMessage) + `"}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := jsonrpc.Parse([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				if !errors.Is(err, jsonrpc.ErrInvalid) {
					t.Fatalf("err = %v, want ErrInvalid", err)
				}
				return
			}
			if m.IsRequest() != tt.wantReq {
				t.Fatalf("IsRequest = %v", m.IsRequest())
			}
		})
	}
}

func TestBuildersRoundTrip(t *testing.T) {
	b, err := jsonrpc.NewRequest(3, jsonrpc.MethodView, jsonrpc.ViewParams{RequestID: "ab"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := jsonrpc.Parse(b)
	if err != nil || !m.IsRequest() || *m.ID != 3 || string(m.Params) != `{"requestId":"ab"}` {
		t.Fatalf("request round trip: %+v %v", m, err)
	}
	b, _ = jsonrpc.NewResult(3, []byte(`{"envelope":{"iv":"00"}}`))
	if m, err := jsonrpc.Parse(b); err != nil || !m.IsResponse() || string(m.Result) != `{"envelope":{"iv":"00"}}` {
		t.Fatalf("result round trip: %+v %v", m, err)
	}
	b, _ = jsonrpc.NewError(3, wire.RPCMethodNotFound, "method not found")
	if m, err := jsonrpc.Parse(b); err != nil || m.Error == nil || m.Error.Code != wire.RPCMethodNotFound {
		t.Fatalf("error round trip: %+v %v", m, err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"browser_tabs"}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"envelope":{}}}`,
		`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := jsonrpc.Parse(b)
		if err != nil {
			if !errors.Is(err, jsonrpc.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if m.JSONRPC != jsonrpc.Version || (m.Method == "" && m.ID == nil) {
			t.Fatalf("accepted a malformed message: %q", b)
		}
	})
}

func TestNewRawResult(t *testing.T) {
	b := jsonrpc.NewRawResult(42, []byte("{\"envelope\":{\"iv\":\"00\"}}\n"))
	m, err := jsonrpc.Parse(b)
	if err != nil || !m.IsResponse() || *m.ID != 42 || string(m.Result) != `{"envelope":{"iv":"00"}}` {
		t.Fatalf("raw result %s: %+v %v", b, m, err)
	}
	if _, err := jsonrpc.Parse(jsonrpc.NewRawResult(1, []byte("{broken"))); err == nil {
		t.Fatal("a malformed raw result parsed")
	}
}

// Parse keeps nothing of the bytes it read: the owner's relay reads each message into a
// buffer it lends to the next one (ReadMessageScratch), zeroed when given back, so a
// message that still pointed into it would change under its waiter.
func TestParseCopiesOut(t *testing.T) {
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":7,"result":{"envelope":{"publicKey":"04ab","iv":"00","tag":"11","ciphertext":"QUJD"}}}`,
		`{"jsonrpc":"2.0","id":8,"error":{"code":-32000,"message":"view failed","data":{"reason":"capture"}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"other.view","params":{"requestId":"r"}}`,
	} {
		buf := []byte(msg)
		m, err := jsonrpc.Parse(buf)
		if err != nil {
			t.Fatalf("%s: %v", msg, err)
		}
		want, err := jsonrpc.Parse([]byte(msg))
		if err != nil {
			t.Fatal(err)
		}
		clear(buf)
		if !reflect.DeepEqual(m, want) {
			t.Fatalf("%s: the message changed with the buffer it was read from: %+v", msg, m)
		}
	}
}
