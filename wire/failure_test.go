package wire_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/agentfy/agentfy/wire"
)

// Every row of the failure table is a whole answer: listeners, a status, a snake_case
// code and a message; a replica's 503 names its reason; a Retry-After is whole seconds.
func TestFailureRows(t *testing.T) {
	token := regexp.MustCompile(`^[a-z][a-z_]{1,31}$`)
	labels := wire.Labels()
	seen := map[string]wire.Failure{}
	for _, f := range wire.Failures() {
		r := f.Row()
		where := fmt.Sprintf("row %d (%d %s %q)", f, r.Status, r.Code, r.Message)
		switch {
		case r.Listeners == 0:
			t.Errorf("%s: no listener answers it", where)
		case r.Status < 400 || r.Status > 599 || http.StatusText(r.Status) == "":
			t.Errorf("%s: not an error status", where)
		case !token.MatchString(r.Code) || r.Message == "":
			t.Errorf("%s: its code is no snake_case token, or it has no message", where)
		case r.Reason != "" && !slices.Contains(labels, r.Reason):
			t.Errorf("%s: reason %q is no label", where, r.Reason)
		case r.Status == http.StatusServiceUnavailable && r.Listeners&wire.ListenerBroker == 0 && r.Reason == "":
			t.Errorf("%s: a replica's 503 that names no reason", where)
		case r.RetryAfter%time.Second != 0 || r.RetryAfter < 0:
			t.Errorf("%s: Retry-After %s is not whole seconds", where, r.RetryAfter)
		case r.Crosses && r.Reason == "":
			t.Errorf("%s: crosses processes without a reason", where)
		}
		for _, l := range wire.AllListeners() {
			if r.Listeners&l == 0 {
				continue
			}
			k := fmt.Sprint(l, r.Status, r.Code, r.Message, r.Reason)
			if prev, ok := seen[k]; ok {
				t.Errorf("%s: the same answer as row %d on the %s listener", where, prev, l.Names()[0])
			}
			seen[k] = f
		}
	}
	for _, l := range wire.AllListeners() {
		n := 0
		for _, f := range wire.Failures() {
			if f.Row().Listeners&l != 0 {
				n++
			}
		}
		if n == 0 || len(l.Names()) != 1 {
			t.Errorf("listener %v (%q): %d rows", l, l.Names(), n)
		}
	}
	if got := wire.Failure(0).Row(); got != wire.FailPanic.Row() {
		t.Errorf("the zero key's row %+v, want FailPanic's", got)
	}
}

// A reason is defined once: every row that names it agrees whether it crosses
// processes; each reason has exactly one replica row of the public listener, which
// alone carries its JSON-RPC code (every crossing reason has one, no other reason
// does); the broker answers a reason it names with the reason as its code and one
// status.
func TestFailureReasons(t *testing.T) {
	crosses := map[string]bool{}
	public := map[string]int{}
	broker := map[string]int{}
	for _, f := range wire.Failures() {
		r := f.Row()
		if r.Reason == "" {
			if r.RPC != 0 {
				t.Errorf("row %d: a JSON-RPC code without a reason", f)
			}
			continue
		}
		if c, ok := crosses[r.Reason]; ok && c != r.Crosses {
			t.Errorf("row %d: %s crosses processes %t here, %t elsewhere", f, r.Reason, r.Crosses, c)
		}
		crosses[r.Reason] = r.Crosses
		if r.Listeners&wire.ListenerPublic != 0 {
			public[r.Reason]++
			if (r.RPC != 0) != r.Crosses {
				t.Errorf("row %d: %s crosses %t, JSON-RPC code %d", f, r.Reason, r.Crosses, r.RPC)
			}
		} else if r.RPC != 0 {
			t.Errorf("row %d: a JSON-RPC code off the reason's own row", f)
		}
		if r.Listeners&wire.ListenerBroker != 0 {
			if r.Code != r.Reason {
				t.Errorf("row %d: the broker answers %s with code %q", f, r.Reason, r.Code)
			}
			if s, ok := broker[r.Reason]; ok && s != r.Status {
				t.Errorf("row %d: the broker answers %s with %d here, %d elsewhere", f, r.Reason, r.Status, s)
			}
			broker[r.Reason] = r.Status
		}
	}
	for _, l := range wire.Labels() {
		if public[l] != 1 {
			t.Errorf("%s: %d rows of the public listener, want 1", l, public[l])
		}
		if crosses[l] != wire.IsReason(l) {
			t.Errorf("%s: crosses %t, IsReason %t", l, crosses[l], wire.IsReason(l))
		}
	}
	// identity_unavailable is raised at the edge: it never crosses a process.
	if wire.IsReason(wire.ReasonIdentityUnavailable) || wire.RPCCodeOf(wire.ReasonIdentityUnavailable) != 0 {
		t.Error("identity_unavailable crosses processes")
	}
}

// Each listener's answers, as the documents count them.
func TestListenerNames(t *testing.T) {
	all := wire.Listener(0)
	for _, l := range wire.AllListeners() {
		all |= l
	}
	want := []string{"public", "admin", "consume", "channel", "status feed", "metrics", "broker", "broker metrics"}
	if got := all.Names(); !slices.Equal(got, want) {
		t.Errorf("names %q, want %q", got, want)
	}
}

// WriteFailure answers a row as every listener does: its status, its Retry-After, the
// JSON error body, never stored.
func TestWriteFailure(t *testing.T) {
	tests := []struct {
		name      string
		f         wire.Failure
		wantRetry string
	}{
		{"no wait", wire.FailChannelSessionEnded, ""},
		{"a wait", wire.FailTooManyStreams, "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			wire.WriteFailure(w, tt.f)
			r := tt.f.Row()
			want := `{"error":{"code":"` + r.Code + `","message":"` + r.Message + `"}}`
			if w.Code != r.Status || w.Body.String() != want {
				t.Fatalf("%d %s, want %d %s", w.Code, w.Body, r.Status, want)
			}
			h := w.Header()
			if h.Get("Content-Type") != "application/json; charset=utf-8" || h.Get("Cache-Control") != "no-store" || h.Get("Retry-After") != tt.wantRetry {
				t.Fatalf("headers %v", h)
			}
		})
	}
}
