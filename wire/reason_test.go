package wire_test

import (
	"regexp"
	"slices"
	"testing"

	"github.com/agentfy/agentfy/wire"
)

func TestReason(t *testing.T) {
	tests := []struct{ in, want string }{
		{"capture", "capture"},
		{"no_channel", "no_channel"},
		{"broker_down", "broker_down"},
		{"", "failed"},
		{"Capture", "failed"},
		{"capture_failed", "failed"},
		{"user:alice", "failed"},
		{"failed", "failed"},
		{"pending_limit", "failed"},
		{"not_durable", "failed"},
		{"internal", "failed"},
		{"identity_unavailable", "failed"},
		{"audit_unavailable", "failed"},
	}
	for _, tt := range tests {
		if got := wire.Reason(tt.in); got != tt.want {
			t.Errorf("Reason(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// ReasonOr passes a reason on as it came and reads anything else as the hop says.
func TestReasonOr(t *testing.T) {
	tests := []struct{ in, want string }{
		{"capture", "capture"},
		{"failed", "failed"},
		{"exploded", "broker_error"},
		{"", "broker_error"},
		{"internal", "broker_error"},
	}
	for _, tt := range tests {
		if got := wire.ReasonOr(tt.in, wire.ReasonBrokerError); got != tt.want {
			t.Errorf("ReasonOr(%q, broker_error) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// Every reason is a short snake_case token (a metric label), named once.
func TestReasonsAreLabels(t *testing.T) {
	token := regexp.MustCompile(`^[a-z][a-z_]{1,23}$`)
	seen := map[string]bool{}
	for _, r := range wire.Reasons() {
		if !token.MatchString(r) || seen[r] || !wire.IsReason(r) {
			t.Errorf("reason %q: not a unique snake_case label", r)
		}
		seen[r] = true
	}
	if len(seen) != 11 {
		t.Errorf("%d reasons, want 11", len(seen))
	}
	// The answering replica's own labels follow, and never cross a process.
	labels := wire.Labels()
	own := []string{"identity_unavailable", "pending_limit", "not_durable", "internal", "audit_unavailable"}
	if !slices.Equal(labels[:len(seen)], wire.Reasons()) || !slices.Equal(labels[len(seen):], own) {
		t.Errorf("labels %q, want the reasons then %q", labels, own)
	}
	for _, l := range labels[len(seen):] {
		if !token.MatchString(l) || seen[l] || wire.IsReason(l) {
			t.Errorf("label %q: not a unique snake_case label of the replica's own", l)
		}
		seen[l] = true
	}
}

func TestTools(t *testing.T) {
	for _, name := range wire.Tools() {
		if !wire.IsTool(name) {
			t.Errorf("IsTool(%q) = false", name)
		}
	}
	for _, name := range []string{"", "browser_view", "BROWSER_OPEN", "browser_open ", "tools/browser_open"} {
		if wire.IsTool(name) {
			t.Errorf("IsTool(%q) = true", name)
		}
	}
	if len(wire.Tools()) != 4 {
		t.Errorf("%d tools, want 4", len(wire.Tools()))
	}
}

// The reasons' rows of the failure table: a code alone stands for exactly one reason, which travels under
// that code; every other reason travels under the code of "unavailable"; the broker
// answers each of its reasons with its own status.
func TestReasonTable(t *testing.T) {
	byCode := map[int]string{}
	for _, r := range wire.Reasons() {
		code := wire.RPCCodeOf(r)
		if back := wire.ReasonOfRPCCode(code); wire.RPCCodeOf(back) != code {
			t.Errorf("%s travels under %d, which stands for %s of code %d", r, code, back, wire.RPCCodeOf(back))
		}
		if prev, ok := byCode[code]; ok && code != wire.RPCUnavailable {
			t.Errorf("%s and %s share code %d", prev, r, code)
		}
		byCode[code] = r
	}
	for code, want := range map[int]string{
		wire.RPCMethodNotFound: wire.ReasonUnsupported, wire.RPCBusy: wire.ReasonBusy, wire.RPCRefused: wire.ReasonRefused,
		wire.RPCUnavailable: wire.ReasonCapture, wire.RPCInvalidParams: wire.ReasonBadRequest, -32603: wire.ReasonFailed,
	} {
		if got := wire.ReasonOfRPCCode(code); got != want {
			t.Errorf("code %d alone stands for %s, want %s", code, got, want)
		}
	}
	for reason, want := range map[string]int{
		wire.ReasonBadRequest: 400, wire.ReasonBusy: 409, wire.ReasonRefused: 502, wire.ReasonCapture: 503,
		wire.ReasonBrokerDown: 503, wire.ReasonBrokerError: 500, wire.ReasonTimeout: 500,
	} {
		if got := wire.BrokerStatus(reason); got != want {
			t.Errorf("the broker answers %s with %d, want %d", reason, got, want)
		}
	}
	for _, l := range wire.Labels() {
		if got := wire.APIStatus(l); got != 503 {
			t.Errorf("the API answers %s with %d, want 503", l, got)
		}
	}
}
