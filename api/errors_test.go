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

	"github.com/gin-gonic/gin"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/api/answer"
	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/feed"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

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
		want       answer.Error
		wantReason string // "" when not a 503
	}{
		{"unauthenticated", auth.ErrUnauthenticated, answer.Unauthenticated, ""},
		{"rate limited", view.ErrRateLimited, answer.RateLimited, ""},
		{"window taken", &view.RateLimitedError{RetryAfter: view.GateWindow}, answer.RateLimited, ""},
		{"not found", auth.ErrNotFound, answer.AgentNotFound, ""},
		{"view capture", &view.UnavailableError{Reason: wire.ReasonCapture}, answer.Unavailable(wire.ReasonCapture), wire.ReasonCapture},
		{"view failed with detail", fmt.Errorf("%w: %s", &view.UnavailableError{Reason: wire.ReasonFailed}, secret), answer.Unavailable(wire.ReasonFailed), wire.ReasonFailed},
		{"pending limit", view.ErrBusy, answer.Unavailable(wire.ReasonInFlightLimit), "pending_limit"},
		{"internal", errors.New(secret), answer.Unavailable(wire.ReasonInternal), "internal"},
		{"identity provider unavailable", auth.ErrIdentityUnavailable, answer.IdentityUnavailable, wire.ReasonIdentityUnavailable},
		{"too many streams of one user", feed.ErrTooManyForCaller, answer.To(wire.FailTooManyStreams), ""},
		{"the status feed full", feed.ErrTooManyListeners, answer.To(wire.FailInternal), wire.ReasonInternal},
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
		want := answer.Unavailable(r)
		if r == wire.ReasonIdentityUnavailable {
			want = answer.IdentityUnavailable
		}
		if want.Status != wire.APIStatus(r) {
			t.Errorf("%s is answered %d, the table says %d", r, want.Status, wire.APIStatus(r))
		}
		tests = append(tests, struct {
			name       string
			err        error
			want       answer.Error
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

			if w.Code != tt.want.Status {
				t.Fatalf("status %d, want %d", w.Code, tt.want.Status)
			}
			want, _ := json.Marshal(tt.want.Body())
			if got := strings.TrimSpace(w.Body.String()); got != string(want) {
				t.Fatalf("body %s, want %s", got, want)
			}
			wantRetry := map[answer.Error]string{answer.RateLimited: "2", answer.IdentityUnavailable: "5", answer.To(wire.FailTooManyStreams): "2"}[tt.want]
			if got := w.Header().Get("Retry-After"); got != wantRetry {
				t.Errorf("Retry-After %q for %s, want %q", got, tt.want.Code, wantRetry)
			}
			if got := c.GetString(ctxOutcome); got != tt.want.Code {
				t.Errorf("outcome %q, want %q", got, tt.want.Code)
			}
			if got := c.GetString(ctxReason); got != tt.wantReason {
				t.Errorf("reason %q, want %q", got, tt.wantReason)
			}
			if w.Header().Get("Connection") == "close" {
				t.Errorf("Connection: close on a request without a body")
			}
			if tt.wantReason == "" {
				if logs.Len() != 0 {
					t.Errorf("a %d was logged: %s", tt.want.Status, logs.String())
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
