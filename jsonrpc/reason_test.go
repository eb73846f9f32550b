package jsonrpc_test

import (
	"testing"

	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/wire"
)

// A view's error answer carries its reason in data; from a worker that names none (an
// older image), the code stands for one.
func TestReasonOf(t *testing.T) {
	tests := []struct {
		name string
		err  jsonrpc.Error
		want string
	}{
		{"named", jsonrpc.Error{Code: wire.RPCUnavailable, Data: &jsonrpc.ErrorData{Reason: wire.ReasonBrokerDown}}, wire.ReasonBrokerDown},
		{"named overrides code", jsonrpc.Error{Code: wire.RPCBusy, Data: &jsonrpc.ErrorData{Reason: wire.ReasonTimeout}}, wire.ReasonTimeout},
		{"unknown name, code decides", jsonrpc.Error{Code: wire.RPCBusy, Data: &jsonrpc.ErrorData{Reason: "user:alice"}}, wire.ReasonBusy},
		{"method not found", jsonrpc.Error{Code: wire.RPCMethodNotFound}, wire.ReasonUnsupported},
		{"busy", jsonrpc.Error{Code: wire.RPCBusy}, wire.ReasonBusy},
		{"refused", jsonrpc.Error{Code: wire.RPCRefused}, wire.ReasonRefused},
		{"unavailable", jsonrpc.Error{Code: wire.RPCUnavailable}, wire.ReasonCapture},
		{"invalid params", jsonrpc.Error{Code: wire.RPCInvalidParams}, wire.ReasonBadRequest},
		{"tool failed", jsonrpc.Error{Code: wire.RPCToolFailed}, wire.ReasonFailed},
		{"internal", jsonrpc.Error{Code: wire.RPCInternal}, wire.ReasonFailed},
	}
	for _, tt := range tests {
		if got := jsonrpc.ReasonOf(&tt.err); got != tt.want {
			t.Errorf("%s: ReasonOf = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// Every reason survives the trip through an error answer unchanged, and its code stands
// for it for a replica that reads the code alone wherever the code can say it.
func TestNewViewErrorRoundTrip(t *testing.T) {
	for _, reason := range wire.Reasons() {
		m, err := jsonrpc.Parse(jsonrpc.NewViewError(7, reason, "view failed"))
		if err != nil || !m.IsResponse() || m.Error == nil || *m.ID != 7 {
			t.Fatalf("%s: Parse = %+v, %v", reason, m, err)
		}
		if got := jsonrpc.ReasonOf(m.Error); got != reason {
			t.Errorf("%s: came back as %q", reason, got)
		}
		old := jsonrpc.ReasonOf(&jsonrpc.Error{Code: m.Error.Code})
		switch reason {
		case wire.ReasonUnsupported, wire.ReasonBusy, wire.ReasonRefused, wire.ReasonBadRequest:
			if old != reason {
				t.Errorf("%s: code %d alone reads as %q", reason, m.Error.Code, old)
			}
		default:
			if m.Error.Code != wire.RPCUnavailable {
				t.Errorf("%s: code %d, want wire.RPCUnavailable", reason, m.Error.Code)
			}
		}
	}
	m, err := jsonrpc.Parse(jsonrpc.NewViewError(1, "no such reason", "x"))
	if err != nil || m.Error.Data.Reason != wire.ReasonFailed {
		t.Fatalf("an unknown reason is sent as failed: %+v, %v", m, err)
	}
}

// The data member is strict like the rest: nothing but the reason.
func TestErrorDataStrict(t *testing.T) {
	if _, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"x","data":{"reason":"capture","extra":1}}}`)); err == nil {
		t.Fatal("an unknown field in data was accepted")
	}
}
