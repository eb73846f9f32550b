package reliability

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/wire"
)

// provider is an identity provider's JWK set the suite controls (a testenv.IDP): it
// serves its keys, garbage, or nothing (down), and the replicas of the suite's stack
// accept its tokens besides the stack's own (stack.Options.ExtraJWT).
type provider struct {
	srv *testenv.IDP
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
	// other is another origin with a key set of its own (an attacker's), where the
	// provider redirects in state "redirect".
	other    *testenv.IDP
	otherKey *rsa.PrivateKey
}

// The provider's settings: a short cache period and the shortest staleness bound, so
// that the suite sees a failed refresh and the end of staleness within seconds
// (production: 30 s–1 h and 24 h).
const (
	providerIssuer   = "https://idp.reliability.test"
	providerPeriod   = time.Second
	providerMaxStale = auth.MinJWKSMaxStale // stacktest.ProviderJWKS's
)

// startProvider starts the provider and the other origin, up; the caller closes both.
func startProvider() (*provider, error) {
	p := &provider{}
	var err error
	if p.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		return nil, err
	}
	if p.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, err
	}
	if p.otherKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		return nil, err
	}
	jwk := func(key any, kid string) (json.RawMessage, error) {
		return jose.JSONWebKey{Key: key, KeyID: kid, Use: "sig"}.MarshalJSON()
	}
	otherKey, err := jwk(&p.otherKey.PublicKey, "rsa-other")
	if err != nil {
		return nil, err
	}
	rsaKey, err := jwk(&p.rsa.PublicKey, "rsa-1")
	if err != nil {
		return nil, err
	}
	ecKey, err := jwk(&p.ec.PublicKey, "ec-1")
	if err != nil {
		return nil, err
	}
	p.other = testenv.StartIDP()
	p.other.Set(func(s *testenv.IDPState) { s.Keys = []json.RawMessage{otherKey} })
	p.srv = testenv.StartIDP()
	p.srv.Set(func(s *testenv.IDPState) { s.Keys = []json.RawMessage{rsaKey, ecKey} })
	return p, nil
}

// to puts the provider's key set in state: "up", "garbage" (a set that does not
// parse), "down" (503) or "redirect" (to the other origin's set).
func (p *provider) to(state string) {
	p.srv.Set(func(s *testenv.IDPState) {
		s.Status, s.Body, s.Redirect = 0, nil, ""
		switch state {
		case "garbage":
			s.Body = []byte(`{"keys":[{"kty":"RSA","kid":"rsa-1","n":"!!","e":"AQAB"}`)
		case "down":
			s.Status, s.Body = http.StatusServiceUnavailable, []byte("down")
		case "redirect":
			s.Redirect = p.other.JWKSURL()
		}
	})
}

// otherAsked counts the other origin's requests.
func (p *provider) otherAsked() int {
	jwks, discovery := p.other.Fetches()
	return jwks + discovery
}

// config is how the replicas verify the provider's tokens.
func (p *provider) config() auth.JWTConfig {
	return auth.JWTConfig{
		Issuer: providerIssuer, Audience: "agentfy-api", JWKSURL: p.srv.JWKSURL(),
		JWKS: stacktest.ProviderJWKS(providerPeriod),
	}
}

func (p *provider) claims(sub string) jwt.MapClaims {
	return jwt.MapClaims{"iss": providerIssuer, "aud": "agentfy-api", "sub": sub, "exp": time.Now().Add(time.Hour).Unix()}
}

// TestIdentityProvider attacks the human-token path of a JWK set: algorithm and key
// confusion, a kid naming another key, a critical header, a token issued for later, a
// stale, lying or redirecting provider. Every bad token is 401 — never 5xx, never a
// wait on the provider beyond its fetch deadline. The provider down keeps the keys it
// last gave working for the staleness bound; past it, and for a kid it may have
// rotated to, a token that may be good is 503 identity_unavailable, never 401 (which
// signs a user out). A redirect to another origin is never followed.
func TestIdentityProvider(t *testing.T) {
	const area = "Identity (the platform's OpenID provider, by JWK set)"
	p := idp
	agent := client.NewAgent(t, "agent-identity")
	// view is replica r's answer: its status, and identity_unavailable's code.
	view := func(r int, bearer string) string {
		t.Helper()
		client.OpenGate(t, agent)
		a := client.Do(t, http.MethodGet, client.ViewURL(r, agent), bearer, nil)
		if a.Status == http.StatusServiceUnavailable && strings.Contains(a.Body, `"code":"`+wire.ReasonIdentityUnavailable+`"`) {
			return fmt.Sprintf("%d %s", a.Status, wire.ReasonIdentityUnavailable)
		}
		return fmt.Sprint(a.Status)
	}
	both := func(bearer string) string { return view(0, bearer) + " / " + view(1, bearer) }
	good := stacktest.SignJWT(t, jwt.SigningMethodRS256, p.rsa, "rsa-1", p.claims("u-alice"))
	goodEC := stacktest.SignJWT(t, jwt.SigningMethodES256, p.ec, "ec-1", p.claims("u-alice"))
	pubDER, err := x509.MarshalPKIXPublicKey(&p.rsa.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	otherRSA, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	expired := p.claims("u-alice")
	expired["exp"] = time.Now().Add(-time.Minute).Unix()
	wrongAud := p.claims("u-alice")
	wrongAud["aud"] = "another-api"
	wrongIss := p.claims("u-alice")
	wrongIss["iss"] = "https://evil.example"
	later := p.claims("u-alice")
	later["iat"] = time.Now().Add(time.Hour).Unix()
	critical := jwt.NewWithClaims(jwt.SigningMethodRS256, p.claims("u-alice"))
	critical.Header["kid"], critical.Header["crit"], critical.Header["x-unknown"] = "rsa-1", []string{"x-unknown"}, true
	criticalToken, err := critical.SignedString(p.rsa)
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name, bearer, want string
	}{
		{"the_provider's_RS256_token", good, "200 / 200"},
		{"the_provider's_ES256_token", goodEC, "200 / 200"},
		{"alg_none_naming_a_known_key", stacktest.SignJWT(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "rsa-1", p.claims("u-alice")), "401 / 401"},
		{"HS256_keyed_with_the_RSA_public_key_(key_confusion)", stacktest.SignJWT(t, jwt.SigningMethodHS256, pubPEM, "rsa-1", p.claims("u-alice")), "401 / 401"},
		{"HS256_keyed_with_the_RSA_modulus", stacktest.SignJWT(t, jwt.SigningMethodHS256, p.rsa.N.Bytes(), "rsa-1", p.claims("u-alice")), "401 / 401"},
		{"ES256_signed_by_the_EC_key_naming_the_RSA_kid", stacktest.SignJWT(t, jwt.SigningMethodES256, p.ec, "rsa-1", p.claims("u-alice")), "401 / 401"},
		{"RS256_naming_the_EC_kid", stacktest.SignJWT(t, jwt.SigningMethodRS256, p.rsa, "ec-1", p.claims("u-alice")), "401 / 401"},
		{"PS256_by_another_RSA_key_naming_a_known_kid", stacktest.SignJWT(t, jwt.SigningMethodPS256, otherRSA, "rsa-1", p.claims("u-alice")), "401 / 401"},
		{"expired", stacktest.SignJWT(t, jwt.SigningMethodRS256, p.rsa, "rsa-1", expired), "401 / 401"},
		{"another_audience", stacktest.SignJWT(t, jwt.SigningMethodRS256, p.rsa, "rsa-1", wrongAud), "401 / 401"},
		{"another_issuer", stacktest.SignJWT(t, jwt.SigningMethodRS256, p.rsa, "rsa-1", wrongIss), "401 / 401"},
		{"no_user", stacktest.SignJWT(t, jwt.SigningMethodRS256, p.rsa, "rsa-1", p.claims("")), "401 / 401"},
		{"issued an hour from now (iat beyond the leeway)", stacktest.SignJWT(t, jwt.SigningMethodRS256, p.rsa, "rsa-1", later), "401 / 401"},
		{"a critical header extension the verifier does not know (RFC 7515 4.1.11)", criticalToken, "401 / 401"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			observed := ""
			record(t, area, tc.want, &observed)
			observed = both(tc.bearer)
			if observed != tc.want {
				t.Errorf("got %s", observed)
			}
		})
	}

	failures := func() uint64 {
		var n uint64
		for _, r := range st.Replicas {
			for _, s := range r.JWT.JWKSStatus() {
				n += s.Failures
			}
		}
		return n
	}
	keys := func() (n int) {
		for _, r := range st.Replicas {
			for _, s := range r.JWT.JWKSStatus() {
				n += s.Keys
			}
		}
		return n
	}
	unknownKid := stacktest.SignJWT(t, jwt.SigningMethodRS256, otherRSA, "rsa-2", p.claims("u-alice"))
	stale := func(t *testing.T, state string) string {
		t.Helper()
		p.to(state)
		t.Cleanup(func() { p.to("up") })
		before := failures()
		testenv.WaitFor(t, 5*providerPeriod, "a failed refresh on each replica", func() bool { return failures() >= before+2 })
		start := time.Now()
		unknown := view(0, unknownKid)
		took := time.Since(start)
		out := fmt.Sprintf("known key %s; unknown kid %s", both(good), unknown)
		if took < auth.DefaultJWKSFetchTimeout+time.Second {
			out += " at once"
		} else {
			out += fmt.Sprintf(" after %v", took.Round(time.Millisecond))
		}
		return out
	}
	for _, state := range []string{"garbage", "down"} {
		name := map[string]string{"garbage": "provider_answers_garbage", "down": "provider_down"}[state]
		t.Run(name, func(t *testing.T) {
			observed := ""
			const want = "known key 200 / 200; unknown kid 503 identity_unavailable at once"
			record(t, area, want, &observed)
			observed = stale(t, state)
			if observed != want {
				t.Errorf("got %s", observed)
			}
		})
	}
	t.Run("provider_down_beyond_the_staleness_bound", func(t *testing.T) {
		observed := ""
		const want = "known key 503 identity_unavailable / 503 identity_unavailable (fail closed, nobody signed out); provider back: 200 / 200"
		record(t, area, want, &observed)
		p.to("down")
		t.Cleanup(func() { p.to("up") })
		testenv.WaitFor(t, providerMaxStale+5*providerPeriod, "no key left on either replica", func() bool { return keys() == 0 })
		observed = "known key " + both(good) + " (fail closed, nobody signed out)"
		p.to("up")
		testenv.WaitFor(t, 5*providerPeriod, "the keys back on both replicas", func() bool { return keys() >= 4 })
		observed += "; provider back: " + both(good)
		if observed != want {
			t.Errorf("got %s", observed)
		}
	})
	t.Run("provider_redirects_to_another_origin", func(t *testing.T) {
		observed := ""
		const want = "the other origin's token 503 identity_unavailable / 503 identity_unavailable, never 200; the provider's 200 / 200; the other origin asked 0 times"
		record(t, area, want, &observed)
		p.to("redirect")
		t.Cleanup(func() { p.to("up") })
		before := failures()
		testenv.WaitFor(t, 5*providerPeriod, "a refused redirect on each replica", func() bool { return failures() >= before+2 })
		forged := stacktest.SignJWT(t, jwt.SigningMethodRS256, p.otherKey, "rsa-other", p.claims("u-alice"))
		observed = fmt.Sprintf("the other origin's token %s, never 200; the provider's %s; the other origin asked %d times", both(forged), both(good), p.otherAsked())
		if observed != want {
			t.Errorf("got %s", observed)
		}
	})
}
