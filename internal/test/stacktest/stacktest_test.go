package stacktest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

func TestDoWithoutValidator(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, "%s %s auth=%q type=%q body=%q", r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), b)
	}))
	t.Cleanup(srv.Close)
	c := &Client{Timeout: 5 * time.Second}
	tests := []struct {
		name, method, bearer string
		body                 io.Reader
		want                 string
	}{
		{"get without credential", http.MethodGet, "", nil, `GET /x auth="" type="" body=""`},
		{"post with bearer and body", http.MethodPost, "tok", strings.NewReader(`{}`), `POST /x auth="Bearer tok" type="application/json" body="{}"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.Do(t, tt.method, srv.URL+"/x", tt.bearer, tt.body)
			if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "2" || r.Body != tt.want {
				t.Fatalf("got %d %v %q, want 429 %q", r.Status, r.Header, r.Body, tt.want)
			}
		})
	}
}

func TestContextDeadline(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		want    time.Duration
	}{
		{"default", 0, DefaultTimeout},
		{"set", time.Minute, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			deadline, ok := (&Client{Timeout: tt.timeout}).Context(t).Deadline()
			if left := time.Until(deadline); !ok || left > tt.want || left < tt.want-time.Second {
				t.Fatalf("deadline in %v (%v), want %v", left, ok, tt.want)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	tests := []struct {
		name string
		r    Response
		want string
	}{
		{"frame", Response{Status: 200, Body: `{"live":true,"page":{"url":"u"}}`}, "200 frame"},
		{"no tab", Response{Status: 200, Body: "{\"live\":true,\"page\":null}\n"}, `200 {"live":true,"page":null}`},
		{"not live", Response{Status: 200, Body: "{\"live\":false}\n"}, `200 {"live":false}`},
		{"gate", Response{Status: 429, Header: http.Header{"Retry-After": {"2"}}}, "429 Retry-After: 2"},
		{"unavailable", Response{Status: 503, Body: `{"error":{}}`}, "503"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.Summary(); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestResult(t *testing.T) {
	tests := []struct {
		name, body string
		want       view.Result
	}{
		{"not live", `{"live":false}`, view.Result{}},
		{"no tab", `{"live":true,"page":null}`, view.Result{Live: true}},
		{"page", `{"live":true,"page":{"url":"u","title":"t","capturedAt":"c","contentType":"image/jpeg","data":"d"}}`,
			view.Result{Live: true, Page: &wire.Page{URL: "u", Title: "t", CapturedAt: "c", ContentType: "image/jpeg", Data: "d"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Response{Status: 200, Body: tt.body}.Result(t)
			if got.Live != tt.want.Live || (got.Page == nil) != (tt.want.Page == nil) || (got.Page != nil && *got.Page != *tt.want.Page) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestStatusStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != StatusPath("agent-x") || r.Header.Get("Authorization") != "Bearer tok" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		for _, data := range []string{
			`{"agentId":"agent-x","status":"stopped","live":false}`,
			`{"agentId":"agent-x","sessionId":"s1","status":"running","live":true,"at":"later"}`,
			`{"agentId":"agent-x","status":"stopped"}`,
			`not json`,
		} {
			fmt.Fprintf(w, "event: status\ndata: %s\n\n", data)
		}
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []StatusEvent
	for ev := range StatusStream(ctx, t, srv.URL, "agent-x", "tok") {
		got = append(got, ev)
	}
	want := []StatusEvent{
		{AgentID: "agent-x", Status: session.Stopped},
		{AgentID: "agent-x", SessionID: "s1", Status: session.Running, Live: true},
	}
	if len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[2].Err == nil || got[2].Status != "" || got[3].Err == nil {
		t.Fatalf("events %+v, want %+v and two malformed", got, want)
	}
}

func TestFrameRoundTrip(t *testing.T) {
	img := DecodeFrame(t, &wire.Page{Data: EncodeJPEG(t, 64, 48)})
	if b := img.Bounds(); b.Dx() != 64 || b.Dy() != 48 {
		t.Fatalf("decoded %v, want 64×48", b)
	}
	if _, err := DecodeBase64("YQ="); err == nil {
		t.Fatal("DecodeBase64 took malformed padding")
	}
}

func TestPaths(t *testing.T) {
	tests := []struct{ name, got, want string }{
		{"view", ViewPath("a1"), "/v1/agents/a1/worker/view"},
		{"partner view", PartnerViewPath("o1", "a1"), "/v1/orgs/o1/agents/a1/worker/view"},
		{"status", StatusPath("a1"), "/v1/agents/a1/worker/status"},
		{"consume request", ConsumeRequest("ab"), `{"requestId":"ab"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Fatalf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}
