package auth_test

import (
	"cmp"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/testenv"
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
	return jwkOf(t, key(kid).public(), kid, alg, use, extra)
}

func jwkOf(t testing.TB, k any, kid, alg, use string, extra map[string]any) json.RawMessage {
	t.Helper()
	b, err := jose.JSONWebKey{Key: k, KeyID: kid, Algorithm: alg, Use: use}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if len(extra) == 0 {
		return b
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range extra {
		m[k] = v
	}
	b, err = json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
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

// idp is a test identity provider: a discovery document at
// /.well-known/openid-configuration and a JWK set at /jwks.json whose keys, headers and
// failures the test sets, and whose fetches it counts.
type idp struct {
	mu sync.Mutex
	// Guarded by mu.
	url          string            // base URL, set once the server listens
	issuer       string            // the discovery document's "issuer"
	jwksURI      string            // the discovery document's "jwks_uri"; "" means url + "/jwks.json"
	keys         []json.RawMessage // the set
	cacheControl string            // the set's Cache-Control header, if any
	status       int               // non-zero: the set's status instead of 200
	body         []byte            // non-nil: the set's body instead of the keys
	hang         bool              // the set is never answered (until the client gives up)
	down         bool              // in-process transport: the connection is refused
	jwksFetches  int
	discoveries  int
}

func (p *idp) set(f func(p *idp)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

// fetches returns how often the set and the discovery document were asked for.
func (p *idp) fetches() (jwks, discovery int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.jwksFetches, p.discoveries
}

func (p *idp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		p.discoveries++
		doc := map[string]string{"issuer": p.issuer, "jwks_uri": cmp.Or(p.jwksURI, p.url+"/jwks.json")}
		p.mu.Unlock()
		_ = json.NewEncoder(w).Encode(doc)
	case "/jwks.json":
		p.jwksFetches++
		hang, status, body, cc := p.hang, p.status, p.body, p.cacheControl
		if body == nil {
			body, _ = json.Marshal(map[string]any{"keys": p.keys})
		}
		p.mu.Unlock()
		if hang {
			<-r.Context().Done()
			return
		}
		if cc != "" {
			w.Header().Set("Cache-Control", cc)
		}
		if status != 0 {
			w.WriteHeader(status)
		}
		_, _ = w.Write(body)
	default:
		p.mu.Unlock()
		http.NotFound(w, r)
	}
}

// serve starts p on a loopback httptest server.
func (p *idp) serve(t testing.TB) *idp {
	t.Helper()
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	p.set(func(p *idp) { p.url = srv.URL })
	return p
}

// inProcess reaches an idp without a network, for tests inside a synctest bubble
// (where a real socket would keep fake time from advancing).
type inProcess struct{ p *idp }

func (tr inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	tr.p.mu.Lock()
	down := tr.p.down
	tr.p.mu.Unlock()
	if down {
		return nil, errors.New("dial tcp: connection refused")
	}
	rec := httptest.NewRecorder()
	tr.p.ServeHTTP(rec, r)
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	return rec.Result(), nil
}

// inProcessIDP is an idp at http://idp.test and a client that reaches it.
func inProcessIDP() (*idp, *http.Client) {
	p := &idp{url: "http://idp.test", issuer: "http://idp.test"}
	return p, &http.Client{Transport: inProcess{p}}
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

// jwksConfig is a configuration for p's set at /jwks.json.
func jwksConfig(p *idp) auth.JWTConfig {
	p.mu.Lock()
	defer p.mu.Unlock()
	return auth.JWTConfig{Issuer: idpIssuer, Audience: "agentfy-api", JWKSURL: p.url + "/jwks.json"}
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
func wantFetches(t testing.TB, p *idp, n int) {
	t.Helper()
	if got, _ := p.fetches(); got != n {
		t.Fatalf("jwks fetched %d times, want %d", got, n)
	}
}
