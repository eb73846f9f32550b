package answer

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/feed"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

// TestPublic: every error callers branch on has its status, code and plain message;
// anything else is 503 unavailable.
func TestPublic(t *testing.T) {
	internal := errors.New("dial tcp 10.0.0.7:6379: connect: connection refused")
	tests := []struct {
		name string
		err  error
		want plain
	}{
		{"unauthenticated", auth.ErrUnauthenticated, plain{401, "unauthenticated", "a valid bearer credential is required"}},
		{"forbidden", auth.ErrForbidden, plain{403, "forbidden", "this credential may not do that"}},
		{"not found", auth.ErrNotFound, plain{404, "not_found", "agent not found"}},
		{"rate limited", view.ErrRateLimited, plain{429, "rate_limited", "one view per agent every 2 seconds; retry later"}},
		{"capability not found", view.ErrGrantNotFound, plain{404, "not_found", "capability not found"}},
		{"too many streams", feed.ErrTooManyForCaller, plain{429, "too_many_streams", "this user holds too many status streams; close one"}},
		{"identity provider unavailable", auth.ErrIdentityUnavailable, plain{503, "identity_unavailable", "the sign-in service is not answering; retry later (this is not a sign-out)"}},
		{"wrapped identity unavailable", fmt.Errorf("verify: %w", auth.ErrIdentityUnavailable), IdentityUnavailable.plain()},
		{"wrapped unauthenticated", fmt.Errorf("verify: %w", auth.ErrUnauthenticated), Unauthenticated.plain()},
		{"wrapped forbidden", fmt.Errorf("authorize: %w", auth.ErrForbidden), Forbidden.plain()},
		{"wrapped not found", fmt.Errorf("agent: %w", auth.ErrNotFound), AgentNotFound.plain()},
		{"wrapped rate limited", fmt.Errorf("gate: %w", view.ErrRateLimited), RateLimited.plain()},
		{"wrapped grant", fmt.Errorf("consume: %w", view.ErrGrantNotFound), errGrant.plain()},
		{"joined with a sentinel", errors.Join(internal, auth.ErrForbidden), Forbidden.plain()},
		{"pending limit", view.ErrBusy, Unavailable(wire.ReasonInFlightLimit).plain()},
		{"view unavailable", &view.UnavailableError{Reason: wire.ReasonCapture}, Unavailable(wire.ReasonCapture).plain()},
		{"not durable", fmt.Errorf("%w: 0 of 1 replicas", view.ErrNotDurable), Unavailable(wire.ReasonNotDurable).plain()},
		{"all listeners", feed.ErrTooManyListeners, Unavailable(wire.ReasonInternal).plain()},
		{"internal", internal, Unavailable(wire.ReasonInternal).plain()},
		{"wrapped internal", fmt.Errorf("session: get: %w", internal), Unavailable(wire.ReasonInternal).plain()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Public(tt.err).plain(); got != tt.want {
				t.Fatalf("Public(%v) = %+v, want %+v", tt.err, got, tt.want)
			}
		})
	}
	// One body for every reason a view fails for but identity_unavailable, whose code
	// tells the client not to sign out: the reason is for operators.
	for _, r := range wire.Labels() {
		want := plain{http.StatusServiceUnavailable, "unavailable", "the browser view is temporarily unavailable; retry later"}
		if r == wire.ReasonIdentityUnavailable {
			want = IdentityUnavailable.plain()
		}
		if got := Unavailable(r).plain(); got != want {
			t.Fatalf("Unavailable(%s) = %+v, want %+v", r, got, want)
		}
	}
}

// TestReason: Reason is one of a closed set of labels.
func TestReason(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"pending limit", view.ErrBusy, "pending_limit"},
		{"wrapped pending limit", fmt.Errorf("view: %w", view.ErrBusy), "pending_limit"},
		{"not durable", view.ErrNotDurable, "not_durable"},
		{"wrapped not durable", fmt.Errorf("%w: 0 of 1 replicas in 500ms", view.ErrNotDurable), "not_durable"},
		{"wrapped view reason", fmt.Errorf("%w: nats: connection closed", &view.UnavailableError{Reason: wire.ReasonFailed}), wire.ReasonFailed},
		{"bare unavailable sentinel", view.ErrUnavailable, "internal"},
		{"redis down", errors.New("redis: connection pool timeout"), "internal"},
		{"not a 503 at all", auth.ErrForbidden, "internal"},
		{"identity provider unavailable", fmt.Errorf("verify: %w", auth.ErrIdentityUnavailable), wire.ReasonIdentityUnavailable},
	}
	for _, r := range wire.Reasons() {
		tests = append(tests, struct {
			name string
			err  error
			want string
		}{"view " + r, &view.UnavailableError{Reason: r}, r})
	}
	labels := wire.Labels()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Reason(tt.err)
			if got != tt.want {
				t.Fatalf("Reason(%v) = %q, want %q", tt.err, got, tt.want)
			}
			found := false
			for _, l := range labels {
				found = found || l == got
			}
			if !found {
				t.Fatalf("Reason(%v) = %q, not a metric label", tt.err, got)
			}
		})
	}
}

// plain is what a client reads of an answer: its status and body.
type plain struct {
	status        int
	code, message string
}

func (e Error) plain() plain { return plain{e.Status, e.Code, e.Message} }

// The failure table's rows that name values say them as they are: the gate's window,
// the identity answer's wait (a client's polling interval, the SDK's pollIntervalMs).
// The admin API's body bound is checked where it is declared.
func TestFailureRowsSayThisPackagesValues(t *testing.T) {
	if got := RateLimited.Row().RetryAfter; got != view.GateWindow {
		t.Errorf("rate_limited's Retry-After %s, want the gate's window %s", got, view.GateWindow)
	}
	if want := fmt.Sprintf("one view per agent every %d seconds; retry later", int(view.GateWindow/time.Second)); RateLimited.Message != want {
		t.Errorf("rate_limited says %q, want %q", RateLimited.Message, want)
	}
	if got := IdentityUnavailable.Row().RetryAfter; got != 5*time.Second {
		t.Errorf("identity_unavailable's Retry-After %s, want 5s", got)
	}
	if got := errStreams.Row().RetryAfter; got != 2*time.Second {
		t.Errorf("too_many_streams' Retry-After %s, want 2s (docs/operating.md)", got)
	}
	// Every answer of the replica's listeners is a row of one of them.
	for _, e := range []Error{Unauthenticated, Forbidden, AgentNotFound, RateLimited, IdentityUnavailable, BadRequest, errGrant, errStreams, NoRoute, MethodNotAllowed, UnsupportedMediaType, Panic, errUnavailable, errTwoCredentials, errEncodedSlash, AdminOnly, AdminTooLarge, AdminNoRoute, errAdminNotFound, AdminUnreadable, AdminNotAnObject, errDirectory, Invalid("x"), Missing("x")} {
		if r := e.Row(); r.Listeners&(wire.ListenerPublic|wire.ListenerAdmin|wire.ListenerConsume|wire.ListenerStatus|wire.ListenerMetrics) == 0 || r.Status != e.Status || r.Code != e.Code {
			t.Errorf("%+v: not a row of the replica's listeners", e)
		}
	}
}

// TestRetryAfterSaysTheTimeLeft: a 429 caused by the caller's own pace says the whole
// seconds really left of it, rounded up; one caused by the window says the window.
func TestRetryAfterSaysTheTimeLeft(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"the window", &view.RateLimitedError{RetryAfter: view.GateWindow}, "2"},
		{"a bare refusal", view.ErrRateLimited, "2"},
		{"the pace, 0.4 s left", &view.RateLimitedError{RetryAfter: 400 * time.Millisecond}, "1"},
		{"the pace, 1 ms left", &view.RateLimitedError{RetryAfter: time.Millisecond}, "1"},
		{"the pace, 2.2 s left", &view.RateLimitedError{RetryAfter: 2200 * time.Millisecond}, "3"},
		{"the pace, exactly 3 s left", &view.RateLimitedError{RetryAfter: view.CallerPace}, "3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RetryAfter(tt.err, RateLimited.Row().RetryAfter); got != tt.want {
				t.Errorf("Retry-After %q, want %q", got, tt.want)
			}
		})
	}
}

// TestAdmin: the admin listener's table: a refused change names its field (400, or 404
// for a reference to nothing), a credential error is 401/403, anything else is 503.
func TestAdmin(t *testing.T) {
	redis := errors.New("redis: connection refused")
	tests := []struct {
		name string
		err  error
		want plain
	}{
		{"unknown reference", fmt.Errorf("put agent: %w", &directory.FieldError{Field: "team", Reason: `no team "t9"`, Unknown: true}), plain{404, "not_found", `team: no team "t9"`}},
		{"refused field", &directory.FieldError{Field: "name", Reason: "must be 1 to 200 characters"}, plain{400, "invalid", "name: must be 1 to 200 characters"}},
		{"not found", fmt.Errorf("delete agent: %w", directory.ErrNotFound), plain{404, "not_found", "not found"}},
		{"unauthenticated", auth.ErrUnauthenticated, Unauthenticated.plain()},
		{"another credential", auth.ErrForbidden, plain{403, "forbidden", "the admin API takes admin keys only"}},
		{"redis", redis, plain{503, "unavailable", "the directory is unavailable; retry later"}},
		{"wrapped redis", fmt.Errorf("put user: %w", redis), errDirectory.plain()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Admin(tt.err).plain(); got != tt.want {
				t.Fatalf("Admin(%v) = %+v, want %+v", tt.err, got, tt.want)
			}
		})
	}
}
