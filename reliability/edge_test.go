package reliability

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestEveryV1AnswerIsNoStoreJSON sends what the routes do not take: other methods, a
// trailing slash, unknown paths. Every answer under /v1 carries Cache-Control: no-store
// and a JSON error body, and none is a redirect.
func TestEveryV1AnswerIsNoStoreJSON(t *testing.T) {
	agent := newAgent(t, "agent-edge")
	base := st.Replicas[0].URL
	view := "/v1/agents/" + agent + "/worker/view"
	partner := "/v1/orgs/org-acme/agents/" + agent + "/worker/view"
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	type tc struct {
		name, method, path string
		want               int
	}
	var cases []tc
	for _, m := range []string{http.MethodPost, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions, http.MethodPatch} {
		cases = append(cases, tc{m + "_on_the_agent_view", m, view, http.StatusMethodNotAllowed}, tc{m + "_on_the_partner_view", m, partner, http.StatusMethodNotAllowed})
	}
	cases = append(cases,
		tc{"trailing_slash", http.MethodGet, view + "/", http.StatusNotFound},
		tc{"upper_case_path", http.MethodGet, strings.ToUpper(view), http.StatusNotFound},
		tc{"unknown_v1_path", http.MethodGet, "/v1/nothing-here", http.StatusNotFound},
		tc{"v1_itself", http.MethodGet, "/v1", http.StatusNotFound},
		tc{"POST_to_an_unknown_v1_path", http.MethodPost, "/v1/agents", http.StatusNotFound},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			observed := ""
			record(t, "Every /v1 answer", fmt.Sprintf("%d, Cache-Control: no-store, a JSON error body", c.want), &observed)
			req, err := http.NewRequestWithContext(ctx(t), c.method, base+c.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token(t, "u-alice"))
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
			_ = resp.Body.Close()
			observed = fmt.Sprintf("%d, %s, %s", resp.StatusCode, resp.Header.Get("Cache-Control"), resp.Header.Get("Content-Type"))
			var e struct {
				Error struct{ Code string } `json:"error"`
			}
			jsonOK := c.method == http.MethodHead || (json.Unmarshal(body, &e) == nil && e.Error.Code != "")
			if resp.StatusCode != c.want || resp.Header.Get("Cache-Control") != "no-store" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || !jsonOK {
				t.Fatalf("%s %s: %s body %.100q", c.method, c.path, observed, body)
			}
		})
	}
}

// TestRequestIDIsSanitised: a client's X-Request-Id is used (and logged) only when it is
// a short token of safe characters; anything else is replaced by a fresh id.
func TestRequestIDIsSanitised(t *testing.T) {
	observed := ""
	record(t, "Every /v1 answer", "a safe X-Request-Id is kept; one with spaces, quotes, control characters or over 64 characters is replaced and never logged", &observed)
	url := st.Replicas[0].URL + "/v1/agents/agent-nobody/worker/view"
	for _, tc := range []struct {
		sent string
		kept bool
	}{
		{"abc-123_XYZ", true},
		{strings.Repeat("a", 65), false},
		{`x" injected="1`, false},
		{"a b", false},
		{"évasion", false},
		{"line\tbreak", false},
	} {
		req, err := http.NewRequestWithContext(ctx(t), http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Request-Id", tc.sent)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		got := resp.Header.Get("X-Request-Id")
		if (got == tc.sent) != tc.kept || !requestIDOK(got) {
			t.Fatalf("sent %q, answered %q", tc.sent, got)
		}
		if !tc.kept && strings.Contains(logs.String(), tc.sent) {
			t.Fatalf("the logs hold the unsafe request id %q", tc.sent)
		}
	}
	observed = "1 kept; 5 replaced, none in the logs"
}

func requestIDOK(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}
