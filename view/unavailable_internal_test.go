package view

import (
	"errors"
	"fmt"
	"testing"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/wire"
)

// The owner's code reaches the view's reason unchanged when it is a wire reason, and as
// failed when it is not; the bus's own failures have theirs.
func TestUnavailableFrom(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"no responders", bus.ErrNoResponders, wire.ReasonNoChannel},
		{"wrapped no responders", fmt.Errorf("request: %w", bus.ErrNoResponders), wire.ReasonNoChannel},
		{"timeout", bus.ErrTimeout, wire.ReasonTimeout},
		{"something else", errors.New("nats: connection closed"), wire.ReasonFailed},
		{"remote made-up code", &bus.RemoteError{Code: "user:alice"}, wire.ReasonFailed},
		{"remote empty code", &bus.RemoteError{}, wire.ReasonFailed},
	}
	for _, r := range wire.Reasons() {
		tests = append(tests, struct {
			name string
			err  error
			want string
		}{"remote " + r, &bus.RemoteError{Code: r, Description: "x"}, r})
	}
	for _, tt := range tests {
		err := unavailableFrom(tt.err)
		var u *UnavailableError
		if !errors.As(err, &u) || !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s: unavailableFrom = %v, want an UnavailableError", tt.name, err)
		}
		if u.Reason != tt.want {
			t.Errorf("%s: reason %q, want %q", tt.name, u.Reason, tt.want)
		}
	}
}
