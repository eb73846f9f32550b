package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/auth"
)

var (
	secret = []byte("0123456789abcdef0123456789abcdef-dev")
	now    = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
)

func sign(t *testing.T, method jwt.SigningMethod, key any, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signWithHeader is sign with header members added to the JOSE header.
func signWithHeader(t *testing.T, method jwt.SigningMethod, key any, header map[string]any, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	for k, v := range header {
		tok.Header[k] = v
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func claims(mod func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{"iss": "agentfy-dev", "aud": "agentfy-api", "sub": "u-alice", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
	if mod != nil {
		mod(c)
	}
	return c
}

func TestVerifierHS256(t *testing.T) {
	v, err := auth.NewVerifier(t.Context(), zerolog.Nop(), auth.JWTConfig{Issuer: "agentfy-dev", Audience: "agentfy-api", HS256Secret: secret, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	good := sign(t, jwt.SigningMethodHS256, secret, claims(nil))
	minted, err := auth.MintHS256(secret, "agentfy-dev", "agentfy-api", "u-bob", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	none := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(nil))
	tests := []struct {
		name    string
		token   string
		want    string
		wantErr error
	}{
		{name: "valid", token: good, want: "u-alice"},
		{name: "minted by the CLI helper", token: minted, want: "u-bob"},
		{name: "empty", token: "", wantErr: auth.ErrUnauthenticated},
		{name: "garbage", token: "not.a.jwt", wantErr: auth.ErrUnauthenticated},
		{name: "expired", token: sign(t, jwt.SigningMethodHS256, secret, claims(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() })), wantErr: auth.ErrUnauthenticated},
		{name: "no expiry", token: sign(t, jwt.SigningMethodHS256, secret, claims(func(c jwt.MapClaims) { delete(c, "exp") })), wantErr: auth.ErrUnauthenticated},
		{name: "wrong issuer", token: sign(t, jwt.SigningMethodHS256, secret, claims(func(c jwt.MapClaims) { c["iss"] = "evil" })), wantErr: auth.ErrUnauthenticated},
		{name: "wrong audience", token: sign(t, jwt.SigningMethodHS256, secret, claims(func(c jwt.MapClaims) { c["aud"] = "other" })), wantErr: auth.ErrUnauthenticated},
		{name: "no subject", token: sign(t, jwt.SigningMethodHS256, secret, claims(func(c jwt.MapClaims) { delete(c, "sub") })), wantErr: auth.ErrUnauthenticated},
		{name: "bad signature", token: sign(t, jwt.SigningMethodHS256, []byte("another-secret-another-secret-xx"), claims(nil)), wantErr: auth.ErrUnauthenticated},
		{name: "alg none", token: none, wantErr: auth.ErrUnauthenticated},
		{name: "other algorithm", token: sign(t, jwt.SigningMethodES256, ecKey, claims(nil)), wantErr: auth.ErrUnauthenticated},
		{name: "oversized", token: good + strings.Repeat("A", auth.MaxTokenLen), wantErr: auth.ErrUnauthenticated},
		// RFC 7519 section 4.1.6 and the leeway (0 here): a token minted for later.
		{name: "issued in the future", token: sign(t, jwt.SigningMethodHS256, secret, claims(func(c jwt.MapClaims) { c["iat"] = now.Add(time.Minute).Unix() })), wantErr: auth.ErrUnauthenticated},
		// RFC 7515 section 4.1.11: an extension the verifier does not understand.
		{name: "critical header extension", token: signWithHeader(t, jwt.SigningMethodHS256, secret, map[string]any{"crit": []string{"exp"}, "exp": 1}, claims(nil)), wantErr: auth.ErrUnauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v.Verify(t.Context(), tt.token)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("Verify = %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestVerifierPublicKey(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	v, err := auth.NewVerifier(t.Context(), zerolog.Nop(), auth.JWTConfig{Issuer: "agentfy-dev", Audience: "agentfy-api", PublicKey: &key.PublicKey, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := v.Verify(t.Context(), sign(t, jwt.SigningMethodES256, key, claims(nil))); err != nil || got != "u-alice" {
		t.Fatalf("ES256: %q, %v", got, err)
	}
	// An HS256 token, whatever its secret, is never accepted by an asymmetric verifier.
	if _, err := v.Verify(t.Context(), sign(t, jwt.SigningMethodHS256, secret, claims(nil))); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("HS256 against public key: %v", err)
	}
}

func TestNewVerifierRejectsBadConfig(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	const jwksURL = "https://idp.example/jwks.json"
	tests := []struct {
		name string
		cfgs []auth.JWTConfig
	}{
		{name: "no configuration"},
		{name: "no issuer", cfgs: []auth.JWTConfig{{Audience: "a", HS256Secret: secret}}},
		{name: "no audience", cfgs: []auth.JWTConfig{{Issuer: "i", HS256Secret: secret}}},
		{name: "no key source", cfgs: []auth.JWTConfig{{Issuer: "i", Audience: "a"}}},
		{name: "short secret", cfgs: []auth.JWTConfig{{Issuer: "i", Audience: "a", HS256Secret: []byte("short")}}},
		{name: "secret and public key", cfgs: []auth.JWTConfig{{Issuer: "i", Audience: "a", HS256Secret: secret, PublicKey: &key.PublicKey}}},
		{name: "secret and jwks", cfgs: []auth.JWTConfig{{Issuer: "i", Audience: "a", HS256Secret: secret, JWKSURL: jwksURL}}},
		{name: "jwks and discovery", cfgs: []auth.JWTConfig{{Issuer: "https://idp.example", Audience: "a", JWKSURL: jwksURL, Discovery: true}}},
		{name: "unsupported key type", cfgs: []auth.JWTConfig{{Issuer: "i", Audience: "a", PublicKey: "not a key"}}},
		{name: "jwks url not http", cfgs: []auth.JWTConfig{{Issuer: "i", Audience: "a", JWKSURL: "file:///etc/jwks.json"}}},
		{name: "jwks url relative", cfgs: []auth.JWTConfig{{Issuer: "i", Audience: "a", JWKSURL: "/jwks.json"}}},
		{name: "discovery issuer not a URL", cfgs: []auth.JWTConfig{{Issuer: "agentfy-dev", Audience: "a", Discovery: true}}},
		{name: "negative duration", cfgs: []auth.JWTConfig{{Issuer: "i", Audience: "a", JWKSURL: jwksURL, JWKS: auth.JWKSOptions{FetchTimeout: -time.Second}}}},
		{name: "min refresh over max", cfgs: []auth.JWTConfig{{Issuer: "i", Audience: "a", JWKSURL: jwksURL, JWKS: auth.JWKSOptions{MinRefresh: 2 * time.Hour}}}},
		{name: "max stale within an explicit max refresh", cfgs: []auth.JWTConfig{{Issuer: "i", Audience: "a", JWKSURL: jwksURL, JWKS: auth.JWKSOptions{MaxStale: time.Hour, MaxRefresh: time.Hour}}}},
		{name: "max stale under ten seconds", cfgs: []auth.JWTConfig{{Issuer: "i", Audience: "a", JWKSURL: jwksURL, JWKS: auth.JWKSOptions{MaxStale: 9 * time.Second}}}},
		{name: "second configuration bad", cfgs: []auth.JWTConfig{{Issuer: "i", Audience: "a", HS256Secret: secret}, {Issuer: "i", Audience: "a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v, err := auth.NewVerifier(t.Context(), zerolog.Nop(), tt.cfgs...); err == nil {
				v.Close()
				t.Fatal("accepted")
			}
		})
	}
}

func TestVerifierUserClaim(t *testing.T) {
	v, err := auth.NewVerifier(t.Context(), zerolog.Nop(), auth.JWTConfig{Issuer: "agentfy-dev", Audience: "agentfy-api", HS256Secret: secret, UserClaim: "preferred_username", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		claim   any // nil: absent
		want    string
		wantErr error
	}{
		{name: "string", claim: "u-carol", want: "u-carol"},
		{name: "absent, sub is not used", wantErr: auth.ErrUnauthenticated},
		{name: "empty", claim: "", wantErr: auth.ErrUnauthenticated},
		{name: "number", claim: 42, wantErr: auth.ErrUnauthenticated},
		{name: "list", claim: []string{"u-carol"}, wantErr: auth.ErrUnauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := sign(t, jwt.SigningMethodHS256, secret, claims(func(c jwt.MapClaims) {
				if tt.claim != nil {
					c["preferred_username"] = tt.claim
				}
			}))
			got, err := v.Verify(t.Context(), tok)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("Verify = %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestBearerToken(t *testing.T) {
	for in, want := range map[string]string{
		"Bearer abc": "abc", "bearer abc": "abc", "Bearer  abc ": "abc",
		"": "", "Bearer ": "", "Basic abc": "", "abc": "",
	} {
		if got := auth.BearerToken(in); got != want {
			t.Errorf("BearerToken(%q) = %q, want %q", in, got, want)
		}
	}
}
