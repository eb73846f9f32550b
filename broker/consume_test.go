package broker

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentfy/agentfy/view/envelope"
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
		{"ok with unknown field", 200, `{"publicKey":"` + envelope.PublicKeyHex(key) + `","x":1}`, false},
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
			if err != nil && !errors.Is(err, ErrCapabilityRefused) {
				t.Errorf("error %v is not ErrCapabilityRefused", err)
			}
			if err == nil && !k.Equal(key.PublicKey()) {
				t.Error("Consume() returned another key")
			}
			if got.method != http.MethodPost || got.path != ConsumePath || got.auth != "Bearer the-pass" || got.body != `{"requestId":"`+id+`"}` {
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
		http.Redirect(w, r, target.URL+ConsumePath, http.StatusTemporaryRedirect)
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
		if _, err := c.Consume(t.Context(), id); !errors.Is(err, ErrCapabilityRefused) {
			t.Errorf("Consume(%s) = %v, want ErrCapabilityRefused", base, err)
		}
	}
	if followed.Load() {
		t.Error("the pass followed a redirect")
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	c, _ := NewConsumeClient(nil, target.URL, "the-pass")
	if _, err := c.Consume(ctx, id); !errors.Is(err, ErrCapabilityRefused) {
		t.Errorf("Consume(cancelled) = %v, want ErrCapabilityRefused", err)
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
