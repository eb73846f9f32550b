package auth_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// ec256Provider starts, inside a synctest bubble, an in-process provider publishing
// the ec256 key and a verifier of it (its options changed by opts), and returns once
// the first fetch is done.
func ec256Provider(t *testing.T, opts func(*auth.JWKSOptions)) (*testenv.IDP, auth.JWTConfig, *auth.Verifier, *testenv.Buffer) {
	t.Helper()
	p, client := testenv.InProcessIDP()
	p.Set(func(s *testenv.IDPState) { s.Keys = []json.RawMessage{jwkJSON(t, "ec256", "", "sig", nil)} })
	cfg := jwksConfig(p)
	cfg.JWKS.HTTPClient = client
	if opts != nil {
		opts(&cfg.JWKS)
	}
	v, logs := newVerifier(t, cfg)
	synctest.Wait()
	return p, cfg, v, logs
}

// TestJWKSShortMaxStale: a bound of MinJWKSMaxStale is accepted and refreshed in time;
// past it, while the provider is down, its good tokens are unavailable — never
// refused — and tokens wrong on their face are still refused; when the provider is
// back they verify again with nobody doing anything.
func TestJWKSShortMaxStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, cfg, v, _ := ec256Provider(t, func(o *auth.JWKSOptions) { o.MaxStale = auth.MinJWKSMaxStale })
		good := func() string {
			return signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(time.Now(), nil))
		}
		verifyOK(t, v, good())

		// Refreshed at least twice within the bound: after 12 s up, the set is fresh.
		time.Sleep(12 * time.Second)
		synctest.Wait()
		if jwks, _ := p.Fetches(); jwks < 3 {
			t.Fatalf("%d fetches in 12 s with a 10-s bound, want at least 3", jwks)
		}
		verifyOK(t, v, good())

		p.Set(func(s *testenv.IDPState) { s.Down = true })
		time.Sleep(auth.MinJWKSMaxStale + time.Second)
		synctest.Wait()
		verifyUnavailable(t, v, good())
		verifyUnavailable(t, v, signKID(t, jwt.SigningMethodES256, key("ec256-b").priv, "ec256-b", idpClaims(time.Now(), nil)))
		for name, tok := range map[string]string{
			"expired":          signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(time.Now(), func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Minute).Unix() })),
			"another audience": signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(time.Now(), func(c jwt.MapClaims) { c["aud"] = "someone-else" })),
			"issued later":     signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(time.Now(), func(c jwt.MapClaims) { c["iat"] = time.Now().Add(time.Hour).Unix() })),
			"no subject":       signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(time.Now(), func(c jwt.MapClaims) { delete(c, "sub") })),
			"alg none":         signKID(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "ec256", idpClaims(time.Now(), nil)),
		} {
			if _, err := v.Verify(t.Context(), tok); err != auth.ErrUnauthenticated { //nolint:errorlint // the sentinel itself
				t.Errorf("%s during the outage: %v, want ErrUnauthenticated", name, err)
			}
		}

		p.Set(func(s *testenv.IDPState) { s.Down = false })
		time.Sleep(cfg.JWKS.MaxStale / 2) // the longest wait between two retries
		synctest.Wait()
		verifyOK(t, v, good())
	})
}

// TestJWKSUnknownKIDWhileProviderDown: a kid the last good set lacks is unavailable
// while the refresh it triggers fails (the provider may have rotated to it), and
// refused once a fetched set confirms it is not the provider's; a kid the set has
// verifies through the outage.
func TestJWKSUnknownKIDWhileProviderDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _, v, _ := ec256Provider(t, nil)
		rotated := signKID(t, jwt.SigningMethodES256, key("ec256-b").priv, "ec256-b", idpClaims(time.Now(), nil))

		p.Set(func(s *testenv.IDPState) { s.Status = http.StatusBadGateway })
		verifyUnavailable(t, v, rotated)
		verifyOK(t, v, signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(time.Now(), nil)))
		// Within UnknownKIDInterval no fetch is tried again; the last one failed, so
		// the answer stays unavailable.
		verifyUnavailable(t, v, rotated)

		// Back, without the key: the set confirms the kid is not the provider's.
		p.Set(func(s *testenv.IDPState) { s.Status = 0 })
		time.Sleep(auth.DefaultJWKSUnknownKIDInterval)
		verifyRefused(t, v, rotated)

		// And with it, after rotating to it.
		p.Set(func(s *testenv.IDPState) {
			s.Keys = append(s.Keys, jwkJSON(t, "ec256-b", "", "sig", nil))
		})
		time.Sleep(auth.DefaultJWKSUnknownKIDInterval)
		verifyOK(t, v, rotated)
	})
}

// TestJWKSRetryAfterUnknownKIDFetchFailed: a refresh an unknown kid started that fails
// is retried on the backoff's schedule by the refresh loop, not at the end of the
// period the loop was sleeping through when the request came.
func TestJWKSRetryAfterUnknownKIDFetchFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _, v, logs := ec256Provider(t, nil) // the next fetch is due in DefaultJWKSRefresh (5 min)
		wantFetches(t, p, 1)

		p.Set(func(s *testenv.IDPState) { s.Status = http.StatusServiceUnavailable })
		verifyUnavailable(t, v, signKID(t, jwt.SigningMethodES256, key("ec256-b").priv, "ec256-b", idpClaims(time.Now(), nil)))
		wantFetches(t, p, 2)
		if w := logs.Lines("warn"); len(w) != 1 || !strings.Contains(w[0], `"retry_in":1000`) {
			t.Fatalf("warnings %q, want one with retry_in 1 s", w)
		}

		p.Set(func(s *testenv.IDPState) {
			s.Status = 0
			s.Keys = append(s.Keys, jwkJSON(t, "ec256-b", "", "sig", nil))
		})
		time.Sleep(time.Second) // the retry the warning announced
		synctest.Wait()
		wantFetches(t, p, 3)
		verifyOK(t, v, signKID(t, jwt.SigningMethodES256, key("ec256-b").priv, "ec256-b", idpClaims(time.Now(), nil)))
	})
}

// TestJWKSRedirects: a key set or discovery fetch follows no redirect to another
// origin — the fetch fails, is counted and logged with the target, and the last good
// keys stay — and follows at most three to its own origin.
func TestJWKSRedirects(t *testing.T) {
	// The other origin serves keys of its own: adopting them would let its tokens in.
	evil := testenv.ServeIDP(t)
	evil.Set(func(s *testenv.IDPState) {
		s.Issuer = idpIssuer
		s.Keys = []json.RawMessage{jwkJSON(t, "ec256-c", "", "sig", nil)}
	})
	evilFetches := func() int { jwks, discovery := evil.Fetches(); return jwks + discovery }

	// hops answers /hop/N with a redirect to /hop/N-1 on its own origin, and /hop/0 with
	// the real set.
	p := testenv.ServeIDP(t)
	p.Set(func(s *testenv.IDPState) { s.Keys = []json.RawMessage{jwkJSON(t, "ec256", "", "sig", nil)} })
	var target atomic.Value // where /jwks.json redirects; "" answers the set
	target.Store("")
	mux := http.NewServeMux()
	mux.HandleFunc("/jwks.json", func(w http.ResponseWriter, r *http.Request) {
		if to := target.Load().(string); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		p.ServeHTTP(w, r)
	})
	mux.HandleFunc("/hop/", func(w http.ResponseWriter, r *http.Request) {
		n := strings.TrimPrefix(r.URL.Path, "/hop/")
		if n == "0" {
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/jwks.json"
			p.ServeHTTP(w, r2)
			return
		}
		http.Redirect(w, r, "/hop/"+string(rune(n[0]-1)), http.StatusFound)
	})
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, evil.URL()+"/.well-known/openid-configuration", http.StatusFound)
	})
	origin := httptest.NewServer(mux)
	t.Cleanup(origin.Close)

	t.Run("another origin", func(t *testing.T) {
		clk := testenv.NewClock(now)
		cfg := auth.JWTConfig{Issuer: idpIssuer, Audience: "agentfy-api", JWKSURL: origin.URL + "/jwks.json", Now: clk.Now}
		v, logs := newVerifier(t, cfg)
		good := signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(now, nil))
		verifyOK(t, v, good)

		target.Store(evil.URL() + "/jwks.json")
		t.Cleanup(func() { target.Store("") })
		clk.Advance(auth.DefaultJWKSUnknownKIDInterval)
		forged := signKID(t, jwt.SigningMethodES256, key("ec256-c").priv, "ec256-c", idpClaims(now, nil))
		if _, err := v.Verify(t.Context(), forged); err == nil {
			t.Fatal("a token signed by the other origin's key verified")
		}
		verifyOK(t, v, good) // the last good keys stay
		if n := evilFetches(); n != 0 {
			t.Fatalf("the other origin was asked %d times", n)
		}
		st := v.JWKSStatus()[0]
		if st.Failures != 1 || st.Successes != 1 || st.Keys != 1 {
			t.Fatalf("status %+v, want one failure, one success, one key", st)
		}
		w := logs.Lines("warn")
		if len(w) != 1 || !strings.Contains(w[0], "redirect to another origin refused") || !strings.Contains(w[0], evil.URL()) {
			t.Fatalf("warnings %q, want one naming the refused target %s", w, evil.URL())
		}
	})

	t.Run("discovery to another origin", func(t *testing.T) {
		v, logs := newVerifier(t, auth.JWTConfig{Issuer: origin.URL, Audience: "agentfy-api", Discovery: true})
		tok := signKID(t, jwt.SigningMethodES256, key("ec256-c").priv, "ec256-c", idpClaims(time.Now(), func(c jwt.MapClaims) { c["iss"] = origin.URL }))
		verifyUnavailable(t, v, tok)
		if n := evilFetches(); n != 0 {
			t.Fatalf("the other origin was asked %d times", n)
		}
		if st := v.JWKSStatus()[0]; st.Failures == 0 || st.KeysURL != "" {
			t.Fatalf("status %+v", st)
		}
		if w := logs.Lines("warn"); len(w) == 0 || !strings.Contains(w[0], "redirect to another origin refused") {
			t.Fatalf("warnings %q", w)
		}
	})

	for _, tt := range []struct {
		name string
		hops int
		ok   bool
	}{
		{name: "three on its own origin", hops: 3, ok: true},
		{name: "four on its own origin", hops: 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// /jwks.json → /hop/N-1 → … → /hop/0: tt.hops redirects in all.
			target.Store(origin.URL + "/hop/" + string(rune('0'+tt.hops-1)))
			t.Cleanup(func() { target.Store("") })
			v, _ := newVerifier(t, auth.JWTConfig{Issuer: idpIssuer, Audience: "agentfy-api", JWKSURL: origin.URL + "/jwks.json"})
			tok := signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(time.Now(), nil))
			if tt.ok {
				verifyOK(t, v, tok)
			} else {
				verifyUnavailable(t, v, tok)
			}
		})
	}
}
