package wire_test

import (
	"regexp"
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
	}
	for _, tt := range tests {
		if got := wire.Reason(tt.in); got != tt.want {
			t.Errorf("Reason(%q) = %q, want %q", tt.in, got, tt.want)
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
