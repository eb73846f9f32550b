package channel

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/coder/websocket"

	"github.com/agentfy/agentfy/wire"
)

// The channel refuses an upgrade (wire.WriteFailure) with its row of the failure table, in the JSON error
// body every /v1 route answers with, its status unchanged.
func TestRefuseAnswersJSON(t *testing.T) {
	tests := []struct {
		name       string
		failure    wire.Failure
		wantStatus int
		wantBody   string
	}{
		{"two credentials", wire.FailTwoCredentials, http.StatusBadRequest, `{"error":{"code":"bad_request","message":"send one Authorization header: a request with two is ambiguous"}}`},
		{"no worker pass", wire.FailChannelUnauthenticated, http.StatusUnauthorized, `{"error":{"code":"unauthenticated","message":"a worker pass is required"}}`},
		{"another credential", wire.FailChannelForbidden, http.StatusForbidden, `{"error":{"code":"forbidden","message":"the worker channel takes worker passes only"}}`},
		{"session over", wire.FailChannelSessionEnded, http.StatusUnauthorized, `{"error":{"code":"unauthenticated","message":"the session is not live"}}`},
		{"store down", wire.FailChannelUnavailable, http.StatusServiceUnavailable, `{"error":{"code":"unavailable","message":"the session store is unavailable; retry later"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.failure.Row().Listeners&wire.ListenerChannel == 0 {
				t.Fatalf("%s is no row of the channel's", tt.name)
			}
			w := httptest.NewRecorder()
			wire.WriteFailure(w, tt.failure)
			if w.Code != tt.wantStatus || w.Body.String() != tt.wantBody {
				t.Fatalf("answered %d %s, want %d %s", w.Code, w.Body, tt.wantStatus, tt.wantBody)
			}
			if ct, cc := w.Header().Get("Content-Type"), w.Header().Get("Cache-Control"); ct != "application/json; charset=utf-8" || cc != "no-store" {
				t.Fatalf("Content-Type %q, Cache-Control %q", ct, cc)
			}
		})
	}
}

// Two Authorization headers are refused before any credential is read.
func TestServeHTTPRefusesTwoCredentialsAsJSON(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, wire.ChannelPath, nil)
	r.Header.Add("Authorization", "Bearer a")
	r.Header.Add("Authorization", "Bearer b")
	w := httptest.NewRecorder()
	(&Hub{}).ServeHTTP(w, r)
	if want := wire.FailTwoCredentials.Row(); w.Code != want.Status || w.Body.String() != `{"error":{"code":"bad_request","message":"`+want.Message+`"}}` {
		t.Fatalf("answered %d %s", w.Code, w.Body)
	}
}

// A handshake the WebSocket library refuses is answered with the channel's row for the
// library's status, in the JSON error body: the status is the library's own.
func TestHandshakeRefusalsAreJSON(t *testing.T) {
	handshake := func(r *http.Request) *http.Request {
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", "websocket")
		r.Header.Set("Sec-WebSocket-Version", "13")
		r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		return r
	}
	tests := []struct {
		name string
		req  *http.Request
		want wire.Failure
	}{
		{"no handshake", httptest.NewRequest(http.MethodGet, wire.ChannelPath, nil), wire.FailChannelUpgradeRequired},
		{"no key", func() *http.Request {
			r := handshake(httptest.NewRequest(http.MethodGet, wire.ChannelPath, nil))
			r.Header.Del("Sec-WebSocket-Key")
			return r
		}(), wire.FailChannelBadHandshake},
		{"another origin", func() *http.Request {
			r := handshake(httptest.NewRequest(http.MethodGet, wire.ChannelPath, nil))
			r.Header.Set("Origin", "https://evil.example")
			return r
		}(), wire.FailChannelCrossOrigin},
		{"a writer that cannot be hijacked", handshake(httptest.NewRequest(http.MethodGet, wire.ChannelPath, nil)), wire.FailChannelNotUpgradable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			if _, err := websocket.Accept(&handshakeRefusals{ResponseWriter: w}, tt.req, &websocket.AcceptOptions{}); err == nil {
				t.Fatal("accepted")
			}
			r := tt.want.Row()
			if body := `{"error":{"code":"` + r.Code + `","message":"` + r.Message + `"}}`; w.Code != r.Status || w.Body.String() != body {
				t.Fatalf("%d %s, want %d %s", w.Code, w.Body, r.Status, body)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Fatalf("Content-Type %q", ct)
			}
		})
	}
	// Every row handshakeRefusals answers with is the channel's, one per status.
	seen := map[int]bool{}
	for _, f := range handshakeFailures {
		r := f.Row()
		if r.Listeners&wire.ListenerChannel == 0 || seen[r.Status] {
			t.Errorf("%d %s: not the channel's, or its status twice", r.Status, r.Code)
		}
		seen[r.Status] = true
	}
}

// deferredWriter is a writer that sends its header only when asked, like gin's.
type deferredWriter struct {
	*httptest.ResponseRecorder
	sent bool
}

func (d *deferredWriter) WriteHeaderNow() { d.sent = true }

// handshakeRefusals passes websocket.Accept's call for the 101 on to a writer that
// defers its header (gin's, the replica's router): without it no worker would attach.
func TestHandshakeRefusalsSendThe101(t *testing.T) {
	d := &deferredWriter{ResponseRecorder: httptest.NewRecorder()}
	w := &handshakeRefusals{ResponseWriter: d}
	w.WriteHeader(http.StatusSwitchingProtocols)
	w.WriteHeaderNow()
	if !d.sent || d.Code != http.StatusSwitchingProtocols || w.refused {
		t.Fatalf("sent %t, status %d, refused %t", d.sent, d.Code, w.refused)
	}
}
