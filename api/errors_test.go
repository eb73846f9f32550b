package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/feed"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

// Every error callers branch on has its status, code and plain message; anything else
// is 503 unavailable.
func TestHTTPErrorOf(t *testing.T) {
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
		{"wrapped identity unavailable", fmt.Errorf("verify: %w", auth.ErrIdentityUnavailable), errIdentity.plain()},
		{"wrapped unauthenticated", fmt.Errorf("verify: %w", auth.ErrUnauthenticated), errUnauthenticated.plain()},
		{"wrapped forbidden", fmt.Errorf("authorize: %w", auth.ErrForbidden), errForbidden.plain()},
		{"wrapped not found", fmt.Errorf("agent: %w", auth.ErrNotFound), errNotFound.plain()},
		{"wrapped rate limited", fmt.Errorf("gate: %w", view.ErrRateLimited), errRateLimited.plain()},
		{"wrapped grant", fmt.Errorf("consume: %w", view.ErrGrantNotFound), errGrant.plain()},
		{"joined with a sentinel", errors.Join(internal, auth.ErrForbidden), errForbidden.plain()},
		{"pending limit", view.ErrBusy, unavailable(wire.ReasonInFlightLimit).plain()},
		{"view unavailable", &view.UnavailableError{Reason: wire.ReasonCapture}, unavailable(wire.ReasonCapture).plain()},
		{"not durable", fmt.Errorf("%w: 0 of 1 replicas", view.ErrNotDurable), unavailable(wire.ReasonNotDurable).plain()},
		{"all listeners", feed.ErrTooManyListeners, unavailable(wire.ReasonInternal).plain()},
		{"internal", internal, unavailable(wire.ReasonInternal).plain()},
		{"wrapped internal", fmt.Errorf("session: get: %w", internal), unavailable(wire.ReasonInternal).plain()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := httpErrorOf(tt.err).plain(); got != tt.want {
				t.Fatalf("httpErrorOf(%v) = %+v, want %+v", tt.err, got, tt.want)
			}
		})
	}
	// One body for every reason a view fails for but identity_unavailable, whose code
	// tells the client not to sign out: the reason is for operators.
	for _, r := range wire.Labels() {
		want := plain{http.StatusServiceUnavailable, "unavailable", "the browser view is temporarily unavailable; retry later"}
		if r == wire.ReasonIdentityUnavailable {
			want = errIdentity.plain()
		}
		if got := unavailable(r).plain(); got != want {
			t.Fatalf("unavailable(%s) = %+v, want %+v", r, got, want)
		}
	}
}

// reasonLabel is one of a closed set of labels.
func TestReasonLabel(t *testing.T) {
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
			got := reasonLabel(tt.err)
			if got != tt.want {
				t.Fatalf("reasonLabel(%v) = %q, want %q", tt.err, got, tt.want)
			}
			found := false
			for _, l := range labels {
				found = found || l == got
			}
			if !found {
				t.Fatalf("reasonLabel(%v) = %q, not a metric label", tt.err, got)
			}
		})
	}
}

// plain is what a client reads of an answer: its status and body.
type plain struct {
	status        int
	code, message string
}

func (e httpError) plain() plain { return plain{e.status, e.code, e.message} }

// The failure table's rows that name this package's values say them as they are: the
// gate's window, the admin API's body bound, the identity answer's wait (a client's
// polling interval, the SDK's pollIntervalMs).
func TestFailureRowsSayThisPackagesValues(t *testing.T) {
	if got := errRateLimited.row().RetryAfter; got != view.GateWindow {
		t.Errorf("rate_limited's Retry-After %s, want the gate's window %s", got, view.GateWindow)
	}
	if want := fmt.Sprintf("one view per agent every %d seconds; retry later", int(view.GateWindow/time.Second)); errRateLimited.message != want {
		t.Errorf("rate_limited says %q, want %q", errRateLimited.message, want)
	}
	if want := fmt.Sprintf("the body is larger than %d bytes", MaxAdminBody); errTooLarge.message != want {
		t.Errorf("too_large says %q, want %q", errTooLarge.message, want)
	}
	if got := errIdentity.row().RetryAfter; got != 5*time.Second {
		t.Errorf("identity_unavailable's Retry-After %s, want 5s", got)
	}
	if got := errStreams.row().RetryAfter; got != 2*time.Second {
		t.Errorf("too_many_streams' Retry-After %s, want 2s (docs/operating.md)", got)
	}
	// Every answer of the replica's listeners is a row of one of them.
	for _, e := range []httpError{errUnauthenticated, errForbidden, errNotFound, errRateLimited, errIdentity, errBadRequest, errGrant, errStreams, errNoRoute, errMethod, errMediaType, errInternal, errUnavailable, errTwoCredentials, errEncodedSlash, errAdminOnly, errTooLarge, errAdminRoute, errAdminNotFound, errUnreadable, errNotAnObject, errDirectory, invalid("x"), missing("x")} {
		if r := e.row(); r.Listeners&(wire.ListenerPublic|wire.ListenerAdmin|wire.ListenerConsume|wire.ListenerStatus|wire.ListenerMetrics) == 0 || r.Status != e.status || r.Code != e.code {
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
			if got := retryAfter(tt.err, errRateLimited.row().RetryAfter); got != tt.want {
				t.Errorf("Retry-After %q, want %q", got, tt.want)
			}
		})
	}
}

// The admin listener's table: a refused change names its field (400, or 404 for a
// reference to nothing), a credential error is 401/403, anything else is 503.
func TestAdminErrorOf(t *testing.T) {
	redis := errors.New("redis: connection refused")
	tests := []struct {
		name string
		err  error
		want plain
	}{
		{"unknown reference", fmt.Errorf("put agent: %w", &directory.FieldError{Field: "team", Reason: `no team "t9"`, Unknown: true}), plain{404, "not_found", `team: no team "t9"`}},
		{"refused field", &directory.FieldError{Field: "name", Reason: "must be 1 to 200 characters"}, plain{400, "invalid", "name: must be 1 to 200 characters"}},
		{"not found", fmt.Errorf("delete agent: %w", directory.ErrNotFound), plain{404, "not_found", "not found"}},
		{"unauthenticated", auth.ErrUnauthenticated, errUnauthenticated.plain()},
		{"another credential", auth.ErrForbidden, plain{403, "forbidden", "the admin API takes admin keys only"}},
		{"redis", redis, plain{503, "unavailable", "the directory is unavailable; retry later"}},
		{"wrapped redis", fmt.Errorf("put user: %w", redis), errDirectory.plain()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := adminErrorOf(tt.err).plain(); got != tt.want {
				t.Fatalf("adminErrorOf(%v) = %+v, want %+v", tt.err, got, tt.want)
			}
		})
	}
}

// raisedHere is the error each reason this replica raises itself comes as: the edge's
// identity_unavailable and the replica's own labels (pending_limit, not_durable,
// internal, audit_unavailable). Every other reason arrives from the view service in a view.UnavailableError,
// as the hop that raised it named it.
var raisedHere = map[string]error{
	wire.ReasonIdentityUnavailable: fmt.Errorf("verify: %w", auth.ErrIdentityUnavailable),
	wire.ReasonInFlightLimit:       view.ErrBusy,
	wire.ReasonNotDurable:          fmt.Errorf("%w: 0 of 1 replicas in 500ms", view.ErrNotDurable),
	wire.ReasonInternal:            errors.New("redis: connection pool timeout"),
	wire.ReasonAuditUnavailable:    fmt.Errorf("%w: nats: timeout", audit.ErrUnavailable),
}

// abort renders the table's row; a 503 logs (only) its reason and the internal error, and
// the client sees the plain message alone. Every reason of the table is walked as it
// reaches this hop (raisedHere, or a view.UnavailableError): it is the log line's reason
// and the metric's (ctxReason) unchanged, with its status from the table; a reason only
// this replica raises fails the test until raisedHere raises it.
func TestAbort(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	secret := "dial tcp 10.0.0.7:6379: connect: connection refused"
	tests := []struct {
		name       string
		err        error
		want       httpError
		wantReason string // "" when not a 503
	}{
		{"unauthenticated", auth.ErrUnauthenticated, errUnauthenticated, ""},
		{"rate limited", view.ErrRateLimited, errRateLimited, ""},
		{"window taken", &view.RateLimitedError{RetryAfter: view.GateWindow}, errRateLimited, ""},
		{"not found", auth.ErrNotFound, errNotFound, ""},
		{"view capture", &view.UnavailableError{Reason: wire.ReasonCapture}, unavailable(wire.ReasonCapture), wire.ReasonCapture},
		{"view failed with detail", fmt.Errorf("%w: %s", &view.UnavailableError{Reason: wire.ReasonFailed}, secret), unavailable(wire.ReasonFailed), wire.ReasonFailed},
		{"pending limit", view.ErrBusy, unavailable(wire.ReasonInFlightLimit), "pending_limit"},
		{"internal", errors.New(secret), unavailable(wire.ReasonInternal), "internal"},
		{"identity provider unavailable", auth.ErrIdentityUnavailable, errIdentity, wire.ReasonIdentityUnavailable},
		{"too many streams of one user", feed.ErrTooManyForCaller, errStreams, ""},
		{"the status feed full", feed.ErrTooManyListeners, errUnavailable, wire.ReasonInternal},
	}
	for _, r := range wire.Labels() {
		err, ok := raisedHere[r]
		switch {
		case !ok && !wire.IsReason(r):
			t.Errorf("reason %s is raised on this replica alone, and no test raises it (raisedHere)", r)
			continue
		case !ok:
			err = &view.UnavailableError{Reason: r}
		}
		want := unavailable(r)
		if r == wire.ReasonIdentityUnavailable {
			want = errIdentity
		}
		if want.status != wire.APIStatus(r) {
			t.Errorf("%s is answered %d, the table says %d", r, want.status, wire.APIStatus(r))
		}
		tests = append(tests, struct {
			name       string
			err        error
			want       httpError
			wantReason string
		}{"reason " + r, err, want, r})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			s := &Server{cfg: Config{Log: zerolog.New(&logs)}}
			w := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(w)
			c.Request = httptest.NewRequest(http.MethodGet, "/v1/agents/a1/worker/view", nil)
			s.abort(c, tt.err)

			if w.Code != tt.want.status {
				t.Fatalf("status %d, want %d", w.Code, tt.want.status)
			}
			want, _ := json.Marshal(tt.want.body())
			if got := strings.TrimSpace(w.Body.String()); got != string(want) {
				t.Fatalf("body %s, want %s", got, want)
			}
			wantRetry := map[httpError]string{errRateLimited: "2", errIdentity: "5", errStreams: "2"}[tt.want]
			if got := w.Header().Get("Retry-After"); got != wantRetry {
				t.Errorf("Retry-After %q for %s, want %q", got, tt.want.code, wantRetry)
			}
			if got := c.GetString(ctxOutcome); got != tt.want.code {
				t.Errorf("outcome %q, want %q", got, tt.want.code)
			}
			if got := c.GetString(ctxReason); got != tt.wantReason {
				t.Errorf("reason %q, want %q", got, tt.wantReason)
			}
			if w.Header().Get("Connection") == "close" {
				t.Errorf("Connection: close on a request without a body")
			}
			if tt.wantReason == "" {
				if logs.Len() != 0 {
					t.Errorf("a %d was logged: %s", tt.want.status, logs.String())
				}
				return
			}
			var line struct {
				Level, Reason, Error string
			}
			if err := json.Unmarshal(logs.Bytes(), &line); err != nil || line.Level != "warn" || line.Reason != tt.wantReason || line.Error != tt.err.Error() {
				t.Errorf("log %s, want a warning with reason %q and the error", logs.String(), tt.wantReason)
			}
		})
	}
}

// closeIfBody ends the connection after an error answer only when the request has a
// body left to drain.
func TestCloseIfBody(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	tests := []struct {
		name      string
		body      string
		chunked   bool
		wantClose bool
	}{
		{"no body", "", false, false},
		{"body", `{"requestId":"x"}`, false, true},
		{"chunked body", `{"requestId":"x"}`, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(w)
			c.Request = httptest.NewRequest(http.MethodPost, wire.ConsumePath, strings.NewReader(tt.body))
			if tt.chunked {
				c.Request.ContentLength = -1
				c.Request.TransferEncoding = []string{"chunked"}
			}
			closeIfBody(c)
			if got := w.Header().Get("Connection") == "close"; got != tt.wantClose {
				t.Fatalf("Connection: close = %v, want %v", got, tt.wantClose)
			}
		})
	}
}

// decodeStrict takes one JSON object within the bound, with no unknown field and
// nothing after it; anything else is 400 (415 for another media type).
func TestDecodeStrict(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	id := strings.Repeat("ab", 32)
	// A body of exactly n bytes: {"requestId":"aaa…"}.
	sized := func(n int) string { return `{"requestId":"` + strings.Repeat("a", n-len(`{"requestId":""}`)) + `"}` }
	tests := []struct {
		name        string
		body        string
		contentType string
		wantStatus  int // 0: accepted
		wantID      string
	}{
		{name: "good", body: `{"requestId":"` + id + `"}`, contentType: "application/json", wantID: id},
		{name: "media type parameters", body: `{"requestId":"` + id + `"}`, contentType: "application/json; charset=utf-8", wantID: id},
		{name: "no content type", body: `{"requestId":"` + id + `"}`, wantID: id},
		{name: "trailing space", body: `{"requestId":"` + id + "\"}\n\t ", contentType: "application/json", wantID: id},
		{name: "exactly the bound", body: sized(MaxConsumeBody), contentType: "application/json", wantID: strings.Repeat("a", MaxConsumeBody-len(`{"requestId":""}`))},
		{name: "one byte over the bound", body: sized(MaxConsumeBody + 1), contentType: "application/json", wantStatus: 400},
		{name: "far over the bound", body: `{"requestId":"` + id + `"}` + strings.Repeat(" ", 1<<20), contentType: "application/json", wantStatus: 400},
		{name: "unknown field", body: `{"requestId":"` + id + `","publicKey":"04"}`, contentType: "application/json", wantStatus: 400},
		{name: "second object", body: `{"requestId":"a"} {"requestId":"b"}`, contentType: "application/json", wantStatus: 400},
		{name: "trailing garbage", body: `{"requestId":"a"}x`, contentType: "application/json", wantStatus: 400},
		{name: "trailing bracket", body: `{"requestId":"a"}]`, contentType: "application/json", wantStatus: 400},
		{name: "truncated", body: `{"requestId":"a"`, contentType: "application/json", wantStatus: 400},
		{name: "empty", body: ``, contentType: "application/json", wantStatus: 400},
		{name: "array", body: `[]`, contentType: "application/json", wantStatus: 400},
		{name: "wrong type", body: `{"requestId":1}`, contentType: "application/json", wantStatus: 400},
		{name: "form", body: `requestId=a`, contentType: "application/x-www-form-urlencoded", wantStatus: 415},
		{name: "text", body: `{"requestId":"a"}`, contentType: "text/plain", wantStatus: 415},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(w)
			c.Request = httptest.NewRequest(http.MethodPost, wire.ConsumePath, strings.NewReader(tt.body))
			if tt.contentType != "" {
				c.Request.Header.Set("Content-Type", tt.contentType)
			}
			var req struct {
				RequestID string `json:"requestId"`
			}
			ok := decodeStrict(c, MaxConsumeBody, &req)
			if tt.wantStatus == 0 {
				if !ok || c.IsAborted() || req.RequestID != tt.wantID {
					t.Fatalf("decodeStrict = %v (status %d), id %q; want accepted with %q", ok, w.Code, req.RequestID, tt.wantID)
				}
				return
			}
			if ok || !c.IsAborted() || w.Code != tt.wantStatus {
				t.Fatalf("decodeStrict = %v, status %d; want refused with %d", ok, w.Code, tt.wantStatus)
			}
			var body wire.ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error.Code == "" || strings.Contains(w.Body.String(), "json:") {
				t.Fatalf("body %s: want a plain error body", w.Body.String())
			}
			// What is left of a refused body is never read: the connection ends with the
			// answer (an empty body has nothing left).
			if tt.body != "" && w.Header().Get("Connection") != "close" {
				t.Errorf("Connection %q after a refused body, want close", w.Header().Get("Connection"))
			}
		})
	}
}
