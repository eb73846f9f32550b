package testenv

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// IDP is an identity provider whose answers a test controls: an OpenID discovery
// document at /.well-known/openid-configuration and a JSON Web Key Set at /jwks.json,
// whose keys, headers and failures the test sets with Set, and whose fetches it counts.
// It is built from HTTP and JSON alone, not from package auth, so that auth's own tests
// can use it. ServeIDP and StartIDP serve one on loopback; InProcessIDP reaches one
// without a socket. For a real provider, see StartHydra.
type IDP struct {
	url string           // base URL, fixed before the first request
	srv *httptest.Server // nil in process

	mu          sync.Mutex
	state       IDPState // guarded by mu
	jwksFetches int      // guarded by mu
	discoveries int      // guarded by mu
}

// IDPState is what an IDP answers. The zero value publishes an empty key set, and a
// discovery document with an empty issuer that points at the IDP's own set.
type IDPState struct {
	// Issuer is the discovery document's "issuer".
	Issuer string
	// JWKSURI is the discovery document's "jwks_uri"; empty means the IDP's JWKSURL.
	JWKSURI string
	// Keys are the set's keys (see JWK), raw so that a test may publish odd ones.
	Keys []json.RawMessage
	// CacheControl is the set's Cache-Control header, if any.
	CacheControl string
	// Status, when not zero, is the set's status instead of 200.
	Status int
	// Body, when not nil, is the set's body instead of the keys.
	Body []byte
	// Hang leaves a request for the set unanswered until the client gives up.
	Hang bool
	// Redirect, when not empty, answers a request for the set with 302 Found to it.
	Redirect string
	// Down refuses InProcessIDP's client the connection, as a provider that is not
	// running; a served IDP ignores it (set Status or Hang instead).
	Down bool
}

// StartIDP serves a new IDP on a loopback HTTP server until Close, for a provider that
// outlives every test (a TestMain's); a test uses ServeIDP.
func StartIDP() *IDP {
	p := &IDP{}
	p.srv = httptest.NewServer(p)
	p.url = p.srv.URL
	return p
}

// ServeIDP serves a new IDP on a loopback HTTP server and closes it when the test ends.
func ServeIDP(tb testing.TB) *IDP {
	tb.Helper()
	p := StartIDP()
	tb.Cleanup(p.Close)
	return p
}

// InProcessIDP returns a new IDP at http://idp.test, whose discovery document names that
// issuer, and a client that reaches it without a network: for tests inside a synctest
// bubble, where a real socket would keep fake time from advancing.
func InProcessIDP() (*IDP, *http.Client) {
	p := &IDP{url: "http://idp.test", state: IDPState{Issuer: "http://idp.test"}}
	return p, &http.Client{Transport: inProcess{p}}
}

// Close stops a served IDP; it does nothing to one in process.
func (p *IDP) Close() {
	if p.srv != nil {
		p.srv.Close()
	}
}

// URL is the IDP's base URL: the issuer's discovery document is below it.
func (p *IDP) URL() string { return p.url }

// JWKSURL is the URL of the IDP's key set.
func (p *IDP) JWKSURL() string { return p.url + "/jwks.json" }

// Set changes what the IDP answers, under its lock: requests see all of f's changes or
// none.
func (p *IDP) Set(f func(s *IDPState)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.state)
}

// Fetches returns how often the key set and the discovery document were asked for.
func (p *IDP) Fetches() (jwks, discovery int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.jwksFetches, p.discoveries
}

// ServeHTTP answers the discovery document and the key set as the state says, and 404
// anything else.
func (p *IDP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		p.discoveries++
		doc := map[string]string{"issuer": p.state.Issuer, "jwks_uri": cmp.Or(p.state.JWKSURI, p.JWKSURL())}
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	case "/jwks.json":
		p.jwksFetches++
		s := p.state
		if s.Body == nil {
			s.Body, _ = json.Marshal(map[string]any{"keys": s.Keys})
		}
		p.mu.Unlock()
		switch {
		case s.Hang:
			<-r.Context().Done()
			return
		case s.Redirect != "":
			http.Redirect(w, r, s.Redirect, http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if s.CacheControl != "" {
			w.Header().Set("Cache-Control", s.CacheControl)
		}
		if s.Status != 0 {
			w.WriteHeader(s.Status)
		}
		_, _ = w.Write(s.Body)
	default:
		p.mu.Unlock()
		http.NotFound(w, r)
	}
}

// inProcess is InProcessIDP's transport: it calls the IDP's handler directly.
type inProcess struct{ p *IDP }

func (tr inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	tr.p.mu.Lock()
	down := tr.p.state.Down
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

// JWK is key (a public or private key, or an HMAC secret) as a JSON Web Key published
// under kid, with alg and use when they are not empty, and the members of extra merged
// in: an IDP's key, odd ones included.
func JWK(tb testing.TB, key any, kid, alg, use string, extra map[string]any) json.RawMessage {
	tb.Helper()
	b, err := jose.JSONWebKey{Key: key, KeyID: kid, Algorithm: alg, Use: use}.MarshalJSON()
	if err != nil {
		tb.Fatal(err)
	}
	if len(extra) == 0 {
		return b
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		tb.Fatal(err)
	}
	for k, v := range extra {
		m[k] = v
	}
	if b, err = json.Marshal(m); err != nil {
		tb.Fatal(err)
	}
	return b
}
