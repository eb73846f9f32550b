package auth_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// idpIssuer is the issuer of the test provider's tokens when it is not discovered.
const idpIssuer = "https://idp.example"

// signer is a provider's signing key with the kid it is published under.
type signer struct {
	kid  string
	priv crypto.Signer
}

func (s signer) public() crypto.PublicKey { return s.priv.Public() }

// testKeys are generated once: RSA key generation is slow under -race.
var testKeys = sync.OnceValue(func() map[string]signer {
	ks := map[string]signer{}
	add := func(kid string, priv crypto.Signer, err error) {
		if err != nil {
			panic(err)
		}
		ks[kid] = signer{kid: kid, priv: priv}
	}
	rsaKey := func(bits int) (crypto.Signer, error) { return rsa.GenerateKey(rand.Reader, bits) }
	ecKey := func(c elliptic.Curve) (crypto.Signer, error) { return ecdsa.GenerateKey(c, rand.Reader) }
	k, err := rsaKey(2048)
	add("rsa", k, err)
	k, err = rsaKey(2048)
	add("rsa-rs256", k, err) // published with alg RS256
	k, err = rsaKey(1024)
	add("rsa1024", k, err)
	for _, kid := range []string{"ec256", "ec256-b", "ec256-c", "ec-enc", "ec-ops", "ec-private"} {
		k, err = ecKey(elliptic.P256())
		add(kid, k, err)
	}
	k, err = ecKey(elliptic.P384())
	add("ec384", k, err)
	k, err = ecKey(elliptic.P521())
	add("ec521", k, err)
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	add("ed", ed, err)
	return ks
})

func key(kid string) signer {
	s, ok := testKeys()[kid]
	if !ok {
		panic("no test key " + kid)
	}
	return s
}

// octSecret is the symmetric key of an "oct" JWK that the test provider publishes.
var octSecret = []byte("0123456789abcdef0123456789abcdef-oct")

// jwkJSON is the public JWK of kid (with alg and use when set), extra members merged in.
func jwkJSON(t testing.TB, kid, alg, use string, extra map[string]any) json.RawMessage {
	t.Helper()
	return testenv.JWK(t, key(kid).public(), kid, alg, use, extra)
}

// idpClaims are valid claims of the test provider at now.
func idpClaims(now time.Time, mod func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{"iss": idpIssuer, "aud": []string{"agentfy-api"}, "sub": "u-alice", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
	if mod != nil {
		mod(c)
	}
	return c
}

// signKID signs claims with method and key, with kid in the header unless it is "".
func signKID(t testing.TB, method jwt.SigningMethod, k any, kid string, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newVerifier starts a verifier of cfgs that logs into the returned buffer and is
// closed when the test ends.
func newVerifier(t testing.TB, cfgs ...auth.JWTConfig) (*auth.Verifier, *testenv.Buffer) {
	t.Helper()
	logs := &testenv.Buffer{}
	v, err := auth.NewVerifier(t.Context(), zerolog.New(logs).Level(zerolog.DebugLevel), cfgs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return v, logs
}

// jwksConfig is a configuration for p's set.
func jwksConfig(p *testenv.IDP) auth.JWTConfig {
	return auth.JWTConfig{Issuer: idpIssuer, Audience: "agentfy-api", JWKSURL: p.JWKSURL()}
}

// verifyOK fails the test unless tok verifies as u-alice.
func verifyOK(t testing.TB, v *auth.Verifier, tok string) {
	t.Helper()
	if got, err := v.Verify(t.Context(), tok); err != nil || got != "u-alice" {
		t.Fatalf("Verify = %q, %v; want u-alice", got, err)
	}
}

// verifyRefused fails the test unless tok is refused with ErrUnauthenticated.
func verifyRefused(t testing.TB, v *auth.Verifier, tok string) {
	t.Helper()
	if got, err := v.Verify(t.Context(), tok); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("Verify = %q, %v; want ErrUnauthenticated", got, err)
	}
}

// verifyUnavailable fails the test unless v answers tok with ErrIdentityUnavailable:
// a token that may be good whose keys cannot be confirmed now.
func verifyUnavailable(t testing.TB, v *auth.Verifier, tok string) {
	t.Helper()
	if got, err := v.Verify(t.Context(), tok); !errors.Is(err, auth.ErrIdentityUnavailable) {
		t.Fatalf("Verify = %q, %v; want ErrIdentityUnavailable", got, err)
	}
}

// wantFetches fails the test unless p's set was fetched n times.
func wantFetches(t testing.TB, p *testenv.IDP, n int) {
	t.Helper()
	if got, _ := p.Fetches(); got != n {
		t.Fatalf("jwks fetched %d times, want %d", got, n)
	}
}
