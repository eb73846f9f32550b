package testenv

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/wire"
)

func TestBufferConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				fmt.Fprintf(&b, "line %d\n", i)
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 800 || b.Cap() < len(b.String()) {
		t.Fatalf("%d lines, cap %d for %d bytes", n, b.Cap(), len(b.String()))
	}
}

func TestConsumeAPI(t *testing.T) {
	const pass = "pass-1"
	api := NewConsumeAPI(pass)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	consume := func(t *testing.T, method, path, bearer, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	body := func(id string) string { return `{"requestId":"` + id + `"}` }

	id, key := api.Issue(t)
	tests := []struct {
		name, method, path, bearer, body string
		before                           func()
		want                             int
		wantKey                          bool
	}{
		{"wrong method", http.MethodGet, wire.ConsumePath, pass, body(id), nil, http.StatusNotFound, false},
		{"wrong path", http.MethodPost, "/v1/other", pass, body(id), nil, http.StatusNotFound, false},
		{"wrong pass", http.MethodPost, wire.ConsumePath, "other", body(id), nil, http.StatusForbidden, false},
		{"malformed body", http.MethodPost, wire.ConsumePath, pass, `{"requestId":`, nil, http.StatusBadRequest, false},
		{"unknown id", http.MethodPost, wire.ConsumePath, pass, body(strings.Repeat("0", 64)), nil, http.StatusNotFound, false},
		{"refused", http.MethodPost, wire.ConsumePath, pass, body(id), func() { api.Refuse(http.StatusForbidden) }, http.StatusForbidden, false},
		{"forced body", http.MethodPost, wire.ConsumePath, pass, body(id), func() { api.Refuse(0); api.Answer(`{}`) }, http.StatusOK, false},
		{"issued id", http.MethodPost, wire.ConsumePath, pass, body(id), func() { api.Answer("") }, http.StatusOK, true},
		{"replay", http.MethodPost, wire.ConsumePath, pass, body(id), nil, http.StatusNotFound, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.before != nil {
				tt.before()
			}
			status, b := consume(t, tt.method, tt.path, tt.bearer, tt.body)
			var got struct{ PublicKey string }
			hasKey := json.Unmarshal([]byte(b), &got) == nil && got.PublicKey == envelope.PublicKeyHex(key)
			if status != tt.want || hasKey != tt.wantKey {
				t.Fatalf("got %d %s, want %d (key %v)", status, b, tt.want, tt.wantKey)
			}
		})
	}
}
