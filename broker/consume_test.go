package broker

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/wire"
)

func TestConsumeClient(t *testing.T) {
	key, err := envelope.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	good := `{"publicKey":"` + envelope.PublicKeyHex(key) + `"}`
	// An off-curve point: the generator's x with y+1.
	pub := key.PublicKey().Bytes()
	pub[64] ^= 1
	offCurve := `{"publicKey":"` + hex.EncodeToString(pub) + `"}`

	tests := []struct {
		name    string
		status  int
		body    string
		wantErr bool
	}{
		{"ok", 200, good, false},
		{"unknown field", 200, `{"publicKey":"` + envelope.PublicKeyHex(key) + `","x":1}`, true},
		{"publicKey twice", 200, `{"publicKey":"` + envelope.PublicKeyHex(key) + `","publicKey":"` + envelope.PublicKeyHex(key) + `"}`, true},
		{"PublicKey", 200, `{"PublicKey":"` + envelope.PublicKeyHex(key) + `"}`, true},
		{"publickey beside publicKey", 200, `{"publicKey":"` + envelope.PublicKeyHex(key) + `","publickey":"04"}`, true},
		{"unauthorized", 401, good, true},
		{"forbidden", 403, good, true},
		{"not found", 404, `{"error":"not found"}`, true},
		{"server error", 500, good, true},
		{"no content", 204, "", true},
		{"not json", 200, "publicKey", true},
		{"empty key", 200, `{"publicKey":""}`, true},
		{"uppercase key", 200, `{"publicKey":"` + strings.ToUpper(envelope.PublicKeyHex(key)) + `"}`, true},
		{"compressed key", 200, `{"publicKey":"02` + envelope.PublicKeyHex(key)[2:66] + `"}`, true},
		{"off curve", 200, offCurve, true},
		{"oversized", 200, `{"publicKey":"` + envelope.PublicKeyHex(key) + `","pad":"` + strings.Repeat("a", MaxConsumeResponseBytes) + `"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got struct {
				method, path, auth, body string
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got.method, got.path, got.auth, got.body = r.Method, r.URL.Path, r.Header.Get("Authorization"), string(b)
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			c, err := NewConsumeClient(srv.Client(), srv.URL+"/", "the-pass")
			if err != nil {
				t.Fatal(err)
			}
			const id = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
			k, err := c.Consume(t.Context(), id)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Consume() error = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrGrantRefused) {
				t.Errorf("error %v is not ErrGrantRefused", err)
			}
			if err == nil && !k.Equal(key.PublicKey()) {
				t.Error("Consume() returned another key")
			}
			if got.method != http.MethodPost || got.path != wire.ConsumePath || got.auth != "Bearer the-pass" || got.body != `{"requestId":"`+id+`"}` {
				t.Errorf("request %+v", got)
			}
		})
	}
}

func TestConsumeClientRefusesTransportErrorsAndRedirects(t *testing.T) {
	var followed atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		followed.Store(true)
	}))
	defer target.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+wire.ConsumePath, http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()

	const id = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	for _, base := range []string{redirect.URL, down.URL} {
		c, err := NewConsumeClient(nil, base, "the-pass")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Consume(t.Context(), id); !errors.Is(err, ErrGrantRefused) {
			t.Errorf("Consume(%s) = %v, want ErrGrantRefused", base, err)
		}
	}
	if followed.Load() {
		t.Error("the pass followed a redirect")
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	c, _ := NewConsumeClient(nil, target.URL, "the-pass")
	if _, err := c.Consume(ctx, id); !errors.Is(err, ErrGrantRefused) {
		t.Errorf("Consume(cancelled) = %v, want ErrGrantRefused", err)
	}
}

func TestNewConsumeClient(t *testing.T) {
	tests := []struct {
		name, url, pass string
		wantErr         bool
	}{
		{"http", "http://api:8080", "s3cr3t-pass", false},
		{"https with path", "https://api.example/base/", "s3cr3t-pass", false},
		{"no scheme", "api:8080", "s3cr3t-pass", true},
		{"ftp", "ftp://api", "s3cr3t-pass", true},
		{"no host", "http://", "s3cr3t-pass", true},
		{"empty pass", "http://api", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewConsumeClient(nil, tt.url, tt.pass)
			if (err != nil) != tt.wantErr {
				t.Errorf("NewConsumeClient(%q) error = %v, wantErr %v", tt.url, err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), tt.pass) && tt.pass != "" {
				t.Errorf("error %q shows the pass", err)
			}
		})
	}
}

// consumeRoute is one replica's consume route for the failover tests: it answers
// with status and body, or holds the request until the client gives up when hold is
// set, and counts the requests it received.
type consumeRoute struct {
	srv   *httptest.Server
	calls atomic.Int64
	mu    sync.Mutex
	code  int
	body  string
	hold  bool
}

func newConsumeRoute(tb testing.TB, code int, body string) *consumeRoute {
	tb.Helper()
	r := &consumeRoute{code: code, body: body}
	stop := make(chan struct{})
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.calls.Add(1)
		// Reading the body lets the server notice when the client goes away.
		_, _ = io.Copy(io.Discard, req.Body)
		if req.Method != http.MethodPost || req.URL.Path != wire.ConsumePath || req.Header.Get("Authorization") != "Bearer the-pass" {
			tb.Errorf("replica got %s %s with %q", req.Method, req.URL.Path, req.Header.Get("Authorization"))
		}
		r.mu.Lock()
		code, body, hold := r.code, r.body, r.hold
		r.mu.Unlock()
		if hold {
			select {
			case <-req.Context().Done():
			case <-stop:
			}
			return
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}))
	tb.Cleanup(r.srv.Close)
	tb.Cleanup(func() { close(stop) }) // first: Close waits for held requests
	return r
}

func (r *consumeRoute) set(code int, body string, hold bool) {
	r.mu.Lock()
	r.code, r.body, r.hold = code, body, hold
	r.mu.Unlock()
}

// downURL is the base URL of a server that no longer listens: connections are refused.
func downURL(tb testing.TB) string {
	tb.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.URL
}

// The client tries the API URLs in turn: a replica that is down or answers 5xx passes
// the redemption on; any other answer is final, because a request id is redeemed once.
func TestConsumeClientFailover(t *testing.T) {
	t.Parallel()
	key, err := envelope.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	good := `{"publicKey":"` + envelope.PublicKeyHex(key) + `"}`
	const id = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

	tests := []struct {
		name       string
		first      int    // the first replica's status; 0: it is down (refused)
		firstBody  string // its body
		wantErr    bool
		wantSecond int64 // requests the second replica gets
	}{
		{name: "first down", first: 0, wantSecond: 1},
		{name: "first 503", first: http.StatusServiceUnavailable, firstBody: `{"error":"unavailable"}`, wantSecond: 1},
		{name: "first 500", first: http.StatusInternalServerError, wantSecond: 1},
		{name: "first 502 from a proxy", first: http.StatusBadGateway, firstBody: "<html>bad gateway</html>", wantSecond: 1},
		{name: "first 504", first: http.StatusGatewayTimeout, wantSecond: 1},
		{name: "first answers", first: http.StatusOK, firstBody: good, wantSecond: 0},
		{name: "404 is final", first: http.StatusNotFound, firstBody: `{"error":"not found"}`, wantErr: true},
		{name: "403 is final", first: http.StatusForbidden, wantErr: true},
		{name: "401 is final", first: http.StatusUnauthorized, wantErr: true},
		{name: "400 is final", first: http.StatusBadRequest, wantErr: true},
		{name: "429 is final", first: http.StatusTooManyRequests, wantErr: true},
		{name: "a redirect is final", first: http.StatusTemporaryRedirect, wantErr: true},
		{name: "a malformed 200 is final", first: http.StatusOK, firstBody: `{"publicKey":"04"}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			second := newConsumeRoute(t, http.StatusOK, good)
			firstURL := downURL(t)
			var first *consumeRoute
			if tt.first != 0 {
				first = newConsumeRoute(t, tt.first, tt.firstBody)
				firstURL = first.srv.URL
			}
			c, err := NewFailoverConsumeClient(nil, []string{firstURL, second.srv.URL + "/"}, "the-pass")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), wire.BrokerConsumeTimeout)
			defer cancel()
			k, err := c.Consume(ctx, id)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Consume() error = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrGrantRefused) {
				t.Errorf("error %v is not ErrGrantRefused", err)
			}
			if err == nil && !k.Equal(key.PublicKey()) {
				t.Error("Consume() returned another key")
			}
			if got := second.calls.Load(); got != tt.wantSecond {
				t.Errorf("the second replica got %d requests, want %d", got, tt.wantSecond)
			}
			if first != nil && first.calls.Load() != 1 {
				t.Errorf("the first replica got %d requests, want 1", first.calls.Load())
			}
			if err != nil && (strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "the-pass")) {
				t.Errorf("error %q shows a URL or the pass", err)
			}
		})
	}
}

// After a failover the replica that answered is tried first, until it fails in turn;
// every replica unavailable is a refusal that names no URL.
func TestConsumeClientFailoverOrder(t *testing.T) {
	t.Parallel()
	key, err := envelope.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	good := `{"publicKey":"` + envelope.PublicKeyHex(key) + `"}`
	const id = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	a := newConsumeRoute(t, http.StatusServiceUnavailable, "")
	b := newConsumeRoute(t, http.StatusOK, good)
	c, err := NewFailoverConsumeClient(nil, []string{a.srv.URL, b.srv.URL}, "the-pass")
	if err != nil {
		t.Fatal(err)
	}
	consume := func() error {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), wire.BrokerConsumeTimeout)
		defer cancel()
		_, err := c.Consume(ctx, id)
		return err
	}
	calls := func() [2]int64 { return [2]int64{a.calls.Load(), b.calls.Load()} }

	steps := []struct {
		name    string
		a, b    int // statuses
		wantErr bool
		want    [2]int64 // cumulative requests
	}{
		{"a unavailable: b answers", http.StatusServiceUnavailable, http.StatusOK, false, [2]int64{1, 1}},
		{"b answered last: b first", http.StatusServiceUnavailable, http.StatusOK, false, [2]int64{1, 2}},
		{"a back: b still first", http.StatusOK, http.StatusOK, false, [2]int64{1, 3}},
		{"b unavailable: back to a", http.StatusOK, http.StatusBadGateway, false, [2]int64{2, 4}},
		{"a answered last: a first", http.StatusOK, http.StatusBadGateway, false, [2]int64{3, 4}},
		{"both unavailable", http.StatusServiceUnavailable, http.StatusServiceUnavailable, true, [2]int64{4, 5}},
	}
	for _, s := range steps {
		a.set(s.a, good, false)
		b.set(s.b, good, false)
		err := consume()
		if (err != nil) != s.wantErr {
			t.Fatalf("%s: Consume() error = %v, wantErr %v", s.name, err, s.wantErr)
		}
		if err != nil {
			if !errors.Is(err, ErrGrantRefused) || strings.Contains(err.Error(), "127.0.0.1") {
				t.Errorf("%s: error %q, want ErrGrantRefused naming no URL", s.name, err)
			}
		}
		if got := calls(); got != s.want {
			t.Fatalf("%s: requests %v, want %v", s.name, got, s.want)
		}
	}
}

// A replica that never answers gets only its share of the deadline: the next one
// still redeems in time.
func TestConsumeClientFailoverWithinDeadline(t *testing.T) {
	t.Parallel()
	key, err := envelope.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	const id = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	hung := newConsumeRoute(t, http.StatusOK, "")
	hung.set(0, "", true)
	second := newConsumeRoute(t, http.StatusOK, `{"publicKey":"`+envelope.PublicKeyHex(key)+`"}`)
	c, err := NewFailoverConsumeClient(nil, []string{hung.srv.URL, second.srv.URL}, "the-pass")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), wire.BrokerConsumeTimeout)
	defer cancel()
	if _, err := c.Consume(ctx, id); err != nil {
		t.Fatalf("Consume() = %v, want the second replica's key within the deadline", err)
	}
	if hung.calls.Load() != 1 || second.calls.Load() != 1 {
		t.Errorf("requests %d and %d, want 1 and 1", hung.calls.Load(), second.calls.Load())
	}

	// Every replica hung: the caller's deadline ends it, not later.
	second.set(0, "", true)
	ctx, cancel = context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if _, err := c.Consume(ctx, id); !errors.Is(err, ErrGrantRefused) {
		t.Fatalf("Consume() = %v, want ErrGrantRefused", err)
	}
	if ctx.Err() == nil {
		t.Error("every replica hung, yet Consume returned before its deadline")
	}
}

func TestNewFailoverConsumeClient(t *testing.T) {
	many := make([]string, MaxConsumeURLs+1)
	for i := range many {
		many[i] = "http://api"
	}
	tests := []struct {
		name    string
		urls    []string
		wantErr string
	}{
		{name: "two replicas", urls: []string{"http://api-a:8080", "https://api-b.example/base/"}},
		{name: "the most", urls: many[:MaxConsumeURLs]},
		{name: "none", urls: nil, wantErr: "no API URL"},
		{name: "too many", urls: many, wantErr: "more than 16"},
		{name: "second without a scheme", urls: []string{"http://api-a", "api-b:8080"}, wantErr: "API URL 2 of 2"},
		{name: "first ftp", urls: []string{"ftp://user:secret@api-a", "http://api-b"}, wantErr: "API URL 1 of 2"},
		{name: "empty entry", urls: []string{"http://api-a", ""}, wantErr: "API URL 2 of 2"},
		{name: "no host", urls: []string{"http://"}, wantErr: "API URL 1 of 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewFailoverConsumeClient(nil, tt.urls, "s3cr3t-pass")
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("NewFailoverConsumeClient(%q) = %v", tt.urls, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewFailoverConsumeClient(%q) error = %v, want %q", tt.urls, err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "api-") {
				t.Errorf("error %q shows a URL or a secret", err)
			}
		})
	}
}
