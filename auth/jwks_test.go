package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// The tests on a real loopback server use a fake clock (JWTConfig.Now): after the
// first fetch the refresh loop waits at least MinRefresh of real time, so only the
// test's own calls fetch. Those about the refresh loop's timing run in a synctest
// bubble over an in-process transport, where time.Sleep advances fake time and
// synctest.Wait lets the loop finish what that time made due.

// TestJWKSAlgorithms: every algorithm a JWK may verify, decided by the key.
func TestJWKSAlgorithms(t *testing.T) {
	clk := testenv.NewClock(now)
	p := testenv.ServeIDP(t)
	p.Set(func(s *testenv.IDPState) {
		s.Keys = []json.RawMessage{
			jwkJSON(t, "rsa", "", "sig", nil),
			jwkJSON(t, "rsa-rs256", "RS256", "", nil),
			jwkJSON(t, "ec256", "", "sig", nil),
			jwkJSON(t, "ec384", "ES384", "sig", nil),
			jwkJSON(t, "ed", "", "", nil),
		}
	})
	cfg := jwksConfig(p)
	cfg.Now = clk.Now
	v, _ := newVerifier(t, cfg)
	tests := []struct {
		kid    string
		method jwt.SigningMethod
	}{
		{"rsa", jwt.SigningMethodRS256}, {"rsa", jwt.SigningMethodRS384}, {"rsa", jwt.SigningMethodRS512},
		{"rsa", jwt.SigningMethodPS256}, {"rsa", jwt.SigningMethodPS384}, {"rsa", jwt.SigningMethodPS512},
		{"rsa-rs256", jwt.SigningMethodRS256},
		{"ec256", jwt.SigningMethodES256},
		{"ec384", jwt.SigningMethodES384},
		{"ed", jwt.SigningMethodEdDSA},
	}
	for _, tt := range tests {
		t.Run(tt.kid+" "+tt.method.Alg(), func(t *testing.T) {
			verifyOK(t, v, signKID(t, tt.method, key(tt.kid).priv, tt.kid, idpClaims(now, nil)))
		})
	}
	wantFetches(t, p, 1)
	st := v.JWKSStatus()
	if len(st) != 1 || st[0].Keys != 5 || st[0].Successes != 1 || st[0].Failures != 0 || !st[0].LastSuccess.Equal(now) || st[0].URL != cfg.JWKSURL || st[0].KeysURL != cfg.JWKSURL {
		t.Fatalf("status %+v", st)
	}
}

// TestJWKSStrict: every token a JWK set source must refuse is ErrUnauthenticated.
func TestJWKSStrict(t *testing.T) {
	clk := testenv.NewClock(now)
	rsaPub := key("rsa").public().(*rsa.PublicKey)
	pkix, err := x509.MarshalPKIXPublicKey(rsaPub)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkix})
	p := testenv.ServeIDP(t)
	p.Set(func(s *testenv.IDPState) {
		s.Keys = []json.RawMessage{
			jwkJSON(t, "rsa", "", "sig", nil),
			jwkJSON(t, "rsa-rs256", "RS256", "sig", nil),
			jwkJSON(t, "ec256", "", "sig", nil),
			jwkJSON(t, "ed", "", "", nil),
			jwkJSON(t, "ec-enc", "", "enc", nil),
			jwkJSON(t, "ec-ops", "", "", map[string]any{"key_ops": []string{"encrypt"}}),
			jwkJSON(t, "rsa1024", "", "sig", nil),
			jwkJSON(t, "ec521", "", "sig", nil),
			testenv.JWK(t, key("ec-private").priv, "ec-private", "", "sig", nil), // with "d"
			testenv.JWK(t, octSecret, "oct", "HS256", "sig", nil),
			jwkJSON(t, "ec256-b", "RS256", "sig", nil), // alg does not fit the key
			// Keys with bad or unknown members are ignored one by one (RFC 7517 section
			// 5): the set's other keys still verify.
			json.RawMessage(`{"kty":"RSA","kid":"broken","n":"AQAB"}`),
			json.RawMessage(`{"kty":"EC","kid":"off-curve","crv":"P-256","x":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","y":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`),
			testenv.JWK(t, key("ec256-c").public(), "odd-use", "", "foo", nil),
		}
	})
	cfg := jwksConfig(p)
	cfg.Now = clk.Now
	v, logs := newVerifier(t, cfg)
	verifyOK(t, v, signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(now, nil)))

	es256 := func(kid string, mod func(jwt.MapClaims)) string {
		return signKID(t, jwt.SigningMethodES256, key("ec256").priv, kid, idpClaims(now, mod))
	}
	good := es256("ec256", nil)
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"`+idpIssuer+`","aud":"agentfy-api","sub":"u-mallory","exp":9999999999}`)) + "." + parts[2]
	none := signKID(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "ec256", idpClaims(now, nil))
	tests := []struct {
		name  string
		token string
	}{
		{"alg none", none},
		{"HS256 signed with the RSA public key PEM (key confusion)", signKID(t, jwt.SigningMethodHS256, rsaPEM, "rsa", idpClaims(now, nil))},
		{"HS256 signed with the RSA modulus", signKID(t, jwt.SigningMethodHS256, rsaPub.N.Bytes(), "rsa", idpClaims(now, nil))},
		{"HS256 signed with the RSA JWK", signKID(t, jwt.SigningMethodHS256, []byte(jwkJSON(t, "rsa", "", "sig", nil)), "rsa", idpClaims(now, nil))},
		{"kid of a key that did not sign", signKID(t, jwt.SigningMethodRS256, key("rsa-rs256").priv, "rsa", idpClaims(now, nil))},
		{"kid of a key of another type", es256("rsa", nil)},
		{"algorithm of another curve", signKID(t, jwt.SigningMethodES384, key("ec384").priv, "ec256", idpClaims(now, nil))},
		{"PS256 against a key published for RS256", signKID(t, jwt.SigningMethodPS256, key("rsa-rs256").priv, "rsa-rs256", idpClaims(now, nil))},
		{"EdDSA key with another algorithm", signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ed", idpClaims(now, nil))},
		{"key with use enc", signKID(t, jwt.SigningMethodES256, key("ec-enc").priv, "ec-enc", idpClaims(now, nil))},
		{"key whose key_ops lack verify", signKID(t, jwt.SigningMethodES256, key("ec-ops").priv, "ec-ops", idpClaims(now, nil))},
		{"symmetric oct key", signKID(t, jwt.SigningMethodHS256, octSecret, "oct", idpClaims(now, nil))},
		{"key published with its private part", signKID(t, jwt.SigningMethodES256, key("ec-private").priv, "ec-private", idpClaims(now, nil))},
		{"RSA key under 2048 bits", signKID(t, jwt.SigningMethodRS256, key("rsa1024").priv, "rsa1024", idpClaims(now, nil))},
		{"P-521 key", signKID(t, jwt.SigningMethodES512, key("ec521").priv, "ec521", idpClaims(now, nil))},
		{"key whose alg does not fit it", signKID(t, jwt.SigningMethodES256, key("ec256-b").priv, "ec256-b", idpClaims(now, nil))},
		{"key with an unknown use", signKID(t, jwt.SigningMethodES256, key("ec256-c").priv, "odd-use", idpClaims(now, nil))},
		{"unknown kid", signKID(t, jwt.SigningMethodES256, key("ec256-c").priv, "ec256-c", idpClaims(now, nil))},
		{"tampered claims", tampered},
		{"garbage", "not.a.jwt"},
		{"wrong issuer", es256("ec256", func(c jwt.MapClaims) { c["iss"] = "https://evil.example" })},
		{"wrong audience", es256("ec256", func(c jwt.MapClaims) { c["aud"] = "other" })},
		{"expired", es256("ec256", func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() })},
		{"no expiry", es256("ec256", func(c jwt.MapClaims) { delete(c, "exp") })},
		{"not yet valid", es256("ec256", func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Hour).Unix() })},
		{"no subject", es256("ec256", func(c jwt.MapClaims) { delete(c, "sub") })},
		{"empty subject", es256("ec256", func(c jwt.MapClaims) { c["sub"] = "" })},
		{"subject not a string", es256("ec256", func(c jwt.MapClaims) { c["sub"] = 7 })},
		{"no kid while the set has several keys", es256("", nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			verifyRefused(t, v, tt.token)
		})
	}
	for name, kid := range map[string]any{"empty kid": "", "kid not a string": 7, "kid null": nil} {
		t.Run(name, func(t *testing.T) {
			tok := jwt.NewWithClaims(jwt.SigningMethodES256, idpClaims(now, nil))
			tok.Header["kid"] = kid
			s, err := tok.SignedString(key("ec256").priv)
			if err != nil {
				t.Fatal(err)
			}
			verifyRefused(t, v, s)
		})
	}
	// Of the ignored keys only the usable ones count.
	if st := v.JWKSStatus(); st[0].Keys != 4 {
		t.Fatalf("usable keys %d, want 4", st[0].Keys)
	}
	for _, tt := range tests {
		if strings.Contains(logs.String(), tt.token) {
			t.Fatalf("log holds the token of %q", tt.name)
		}
	}
}

// TestJWKSNoKID: a token without kid verifies only against a set of exactly one usable
// key, and never triggers a refresh.
func TestJWKSNoKID(t *testing.T) {
	tests := []struct {
		name    string
		keys    []string
		wantErr bool
	}{
		{name: "one key", keys: []string{"ec256"}},
		{name: "one usable key among ignored ones", keys: []string{"ec256", "ec-enc", "rsa1024"}},
		{name: "two keys", keys: []string{"ec256", "ec256-b"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testenv.NewClock(now)
			p := testenv.ServeIDP(t)
			p.Set(func(s *testenv.IDPState) {
				for _, kid := range tt.keys {
					use := "sig"
					if kid == "ec-enc" {
						use = "enc"
					}
					s.Keys = append(s.Keys, jwkJSON(t, kid, "", use, nil))
				}
			})
			cfg := jwksConfig(p)
			cfg.Now = clk.Now
			v, _ := newVerifier(t, cfg)
			verifyOK(t, v, signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(now, nil))) // waits for the first fetch
			tok := signKID(t, jwt.SigningMethodES256, key("ec256").priv, "", idpClaims(now, nil))
			if tt.wantErr {
				verifyRefused(t, v, tok)
			} else {
				verifyOK(t, v, tok)
			}
			wantFetches(t, p, 1)
		})
	}
}

// TestJWKSRotation: a new kid verifies after the refresh it triggers; unknown kids
// trigger at most one refresh per UnknownKIDInterval, however many arrive at once; a
// removed key stops verifying after the next refresh.
func TestJWKSRotation(t *testing.T) {
	clk := testenv.NewClock(now)
	p := testenv.ServeIDP(t)
	p.Set(func(s *testenv.IDPState) { s.Keys = []json.RawMessage{jwkJSON(t, "ec256", "", "sig", nil)} })
	cfg := jwksConfig(p)
	cfg.Now = clk.Now
	v, _ := newVerifier(t, cfg)
	tok := func(kid string) string {
		return signKID(t, jwt.SigningMethodES256, key(kid).priv, kid, idpClaims(now, nil))
	}

	verifyOK(t, v, tok("ec256"))
	wantFetches(t, p, 1)

	// The provider rotates: a new key signs from now on.
	p.Set(func(s *testenv.IDPState) { s.Keys = append(s.Keys, jwkJSON(t, "ec256-b", "", "sig", nil)) })
	verifyOK(t, v, tok("ec256-b"))
	wantFetches(t, p, 2)

	// Within the interval an unknown kid is refused at once, without a fetch.
	verifyRefused(t, v, tok("ec256-c"))
	wantFetches(t, p, 2)

	// After it, many tokens with unknown kids at once: one fetch between them.
	clk.Advance(auth.DefaultJWKSUnknownKIDInterval)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() {
			if _, err := v.Verify(t.Context(), tok("ec256-c")); err == nil {
				errs <- fmt.Errorf("unknown kid verified")
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	wantFetches(t, p, 3)

	// The old key leaves the set: it verifies until the next refresh, then not.
	p.Set(func(s *testenv.IDPState) { s.Keys = s.Keys[1:] })
	verifyOK(t, v, tok("ec256"))
	clk.Advance(auth.DefaultJWKSUnknownKIDInterval)
	verifyRefused(t, v, tok("ec256-c")) // triggers the refresh
	wantFetches(t, p, 4)
	verifyRefused(t, v, tok("ec256")) // unknown now, and rate limited: no fetch
	verifyOK(t, v, tok("ec256-b"))
	wantFetches(t, p, 4)
}

// TestJWKSUnknownKIDJoinsFetchInFlight: tokens of a key the provider just rotated to
// that arrive while the refresh the first of them started is in flight wait for that
// refresh and verify, with one fetch between them: none is refused from the set being
// replaced, which would sign its user out.
func TestJWKSUnknownKIDJoinsFetchInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const latency = 100 * time.Millisecond
		p, _, v, _ := ec256Provider(t, func(o *auth.JWKSOptions) {
			o.HTTPClient = &http.Client{Transport: slowTransport{latency: latency, next: o.HTTPClient.Transport}}
		})
		time.Sleep(latency) // the first fetch
		synctest.Wait()
		wantFetches(t, p, 1)

		p.Set(func(s *testenv.IDPState) { s.Keys = append(s.Keys, jwkJSON(t, "ec256-b", "", "sig", nil)) })
		rotated := signKID(t, jwt.SigningMethodES256, key("ec256-b").priv, "ec256-b", idpClaims(time.Now(), nil))
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * latency / 5) // all within the first one's fetch
				if got, err := v.Verify(t.Context(), rotated); err != nil || got != "u-alice" {
					t.Errorf("token %d of the rotated key: %q, %v", i, got, err)
				}
			})
		}
		wg.Wait()
		wantFetches(t, p, 2)
	})
}

// slowTransport answers after latency, as a provider far away does.
type slowTransport struct {
	latency time.Duration
	next    http.RoundTripper
}

func (s slowTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t := time.NewTimer(s.latency)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	return s.next.RoundTrip(r)
}

// TestJWKSOtherIssuerFetchesNothing: a token of another issuer never makes a source
// fetch, whatever its kid.
func TestJWKSOtherIssuerFetchesNothing(t *testing.T) {
	clk := testenv.NewClock(now)
	p := testenv.ServeIDP(t)
	p.Set(func(s *testenv.IDPState) { s.Keys = []json.RawMessage{jwkJSON(t, "ec256", "", "sig", nil)} })
	cfg := jwksConfig(p)
	cfg.Now = clk.Now
	v, _ := newVerifier(t, cfg)
	verifyOK(t, v, signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(now, nil)))
	for i := range 3 {
		clk.Advance(auth.DefaultJWKSUnknownKIDInterval)
		verifyRefused(t, v, signKID(t, jwt.SigningMethodES256, key("ec256").priv, fmt.Sprint("k", i), idpClaims(now, func(c jwt.MapClaims) { c["iss"] = "https://other.example" })))
	}
	wantFetches(t, p, 1)
}

// TestJWKSMaxStale: the last good set verifies while the provider fails, up to MaxStale;
// then the source's tokens are unavailable (never refused) until a refresh succeeds.
func TestJWKSMaxStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, client := testenv.InProcessIDP()
		p.Set(func(s *testenv.IDPState) { s.Keys = []json.RawMessage{jwkJSON(t, "ec256", "", "sig", nil)} })
		cfg := jwksConfig(p)
		cfg.JWKS.HTTPClient = client
		v, logs := newVerifier(t, cfg)
		synctest.Wait()
		fetched := time.Now()
		tok := func() string {
			return signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(time.Now(), nil))
		}
		verifyOK(t, v, tok())

		p.Set(func(s *testenv.IDPState) { s.Status = 500 })
		time.Sleep(auth.DefaultJWKSMaxStale)
		synctest.Wait()
		verifyOK(t, v, tok()) // exactly MaxStale old: still good
		time.Sleep(time.Second)
		verifyUnavailable(t, v, tok()) // too old: cannot be confirmed, not wrong
		// A token wrong on its face is still refused: expired, another audience.
		verifyRefused(t, v, signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(time.Now(), func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() })))
		verifyRefused(t, v, signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(time.Now(), func(c jwt.MapClaims) { c["aud"] = "someone-else" })))
		synctest.Wait()
		st := v.JWKSStatus()[0]
		if st.Keys != 0 || st.Failures == 0 || st.Successes != 1 || !st.LastSuccess.Equal(fetched) {
			t.Fatalf("status %+v", st)
		}
		if n := len(logs.Lines("warn")); uint64(n) != st.Failures {
			t.Fatalf("%d warnings for %d failures", n, st.Failures)
		}

		p.Set(func(s *testenv.IDPState) { s.Status = 0 })
		time.Sleep(auth.DefaultJWKSMinRefresh) // the longest wait between retries
		synctest.Wait()
		verifyOK(t, v, tok())
		if st := v.JWKSStatus()[0]; st.Keys != 1 || st.Successes != 2 {
			t.Fatalf("status %+v", st)
		}
	})
}

// TestJWKSProviderDownAtStart: the verifier starts while the provider fails; tokens are
// unavailable (not refused) until a fetch succeeds, on a real server through the
// unknown-kid refresh.
func TestJWKSProviderDownAtStart(t *testing.T) {
	clk := testenv.NewClock(now)
	p := testenv.ServeIDP(t)
	p.Set(func(s *testenv.IDPState) {
		s.Status = 503
		s.Keys = []json.RawMessage{jwkJSON(t, "ec256", "", "sig", nil)}
	})
	cfg := jwksConfig(p)
	cfg.Now = clk.Now
	v, _ := newVerifier(t, cfg)
	tok := signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(now, nil))
	verifyUnavailable(t, v, tok)
	if st := v.JWKSStatus()[0]; st.Keys != 0 || st.Failures == 0 || !st.LastSuccess.IsZero() {
		t.Fatalf("status %+v", st)
	}

	p.Set(func(s *testenv.IDPState) { s.Status = 0 })
	clk.Advance(auth.DefaultJWKSUnknownKIDInterval)
	verifyOK(t, v, tok)
}

// TestJWKSProviderDownAtStartRetried: the refresh loop retries in the background until
// the provider answers, with no token needed.
func TestJWKSProviderDownAtStartRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, client := testenv.InProcessIDP()
		p.Set(func(s *testenv.IDPState) {
			s.Down = true
			s.Keys = []json.RawMessage{jwkJSON(t, "ec256", "", "sig", nil)}
		})
		cfg := jwksConfig(p)
		cfg.JWKS.HTTPClient = client
		v, logs := newVerifier(t, cfg)
		synctest.Wait()
		if st := v.JWKSStatus()[0]; st.Failures != 1 || st.Keys != 0 {
			t.Fatalf("status %+v", st)
		}
		// Retries after 1 s, 2 s, 4 s…: at 1 s, 3 s and 7 s.
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if st := v.JWKSStatus()[0]; st.Failures != 4 || len(logs.Lines("warn")) != 4 {
			t.Fatalf("status %+v, log:\n%s", st, logs)
		}

		p.Set(func(s *testenv.IDPState) { s.Down = false })
		time.Sleep(auth.DefaultJWKSMinRefresh) // the longest wait between retries
		synctest.Wait()
		if st := v.JWKSStatus()[0]; st.Successes != 1 || st.Keys != 1 {
			t.Fatalf("status %+v", st)
		}
		verifyOK(t, v, signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(time.Now(), nil)))
	})
}

// TestJWKSRefreshPeriod: the set is fetched again after the response's max-age clamped
// to [MinRefresh, MaxRefresh], or DefaultRefresh without one.
func TestJWKSRefreshPeriod(t *testing.T) {
	tests := []struct {
		cacheControl string
		want         time.Duration
	}{
		{"max-age=120", 2 * time.Minute},
		{"public, max-age=600, must-revalidate", 10 * time.Minute},
		{"max-age=5", auth.DefaultJWKSMinRefresh},
		{"max-age=86400", auth.DefaultJWKSMaxRefresh},
		{"max-age=99999999999999999999", auth.DefaultJWKSMaxRefresh},
		{"no-store", auth.DefaultJWKSMinRefresh},
		{"max-age=600, no-cache", auth.DefaultJWKSMinRefresh},
		{"", auth.DefaultJWKSRefresh},
		{"max-age=soon", auth.DefaultJWKSRefresh},
		{"private", auth.DefaultJWKSRefresh},
	}
	for _, tt := range tests {
		t.Run(tt.cacheControl, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, client := testenv.InProcessIDP()
				p.Set(func(s *testenv.IDPState) {
					s.Keys = []json.RawMessage{jwkJSON(t, "ec256", "", "sig", nil)}
					s.CacheControl = tt.cacheControl
				})
				cfg := jwksConfig(p)
				cfg.JWKS.HTTPClient = client
				newVerifier(t, cfg)
				synctest.Wait()
				wantFetches(t, p, 1)
				time.Sleep(tt.want - time.Millisecond)
				synctest.Wait()
				wantFetches(t, p, 1)
				time.Sleep(time.Millisecond)
				synctest.Wait()
				wantFetches(t, p, 2)
				time.Sleep(tt.want)
				synctest.Wait()
				wantFetches(t, p, 3)
			})
		})
	}
}

// TestJWKSRemovedKey: a key removed from the set stops verifying after the refresh
// period, with no unknown-kid refresh involved.
func TestJWKSRemovedKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, client := testenv.InProcessIDP()
		p.Set(func(s *testenv.IDPState) {
			s.Keys = []json.RawMessage{jwkJSON(t, "ec256", "", "sig", nil), jwkJSON(t, "ec256-b", "", "sig", nil)}
			s.CacheControl = "max-age=60"
		})
		cfg := jwksConfig(p)
		cfg.JWKS.HTTPClient = client
		cfg.JWKS.UnknownKIDInterval = time.Hour
		v, _ := newVerifier(t, cfg)
		synctest.Wait()
		tok := func(kid string) string {
			return signKID(t, jwt.SigningMethodES256, key(kid).priv, kid, idpClaims(time.Now(), nil))
		}
		verifyOK(t, v, tok("ec256"))
		verifyRefused(t, v, tok("ec256-c")) // spends the unknown-kid refresh of the hour
		wantFetches(t, p, 2)

		p.Set(func(s *testenv.IDPState) { s.Keys = s.Keys[1:] })
		time.Sleep(59 * time.Second)
		synctest.Wait()
		verifyOK(t, v, tok("ec256")) // cached until the period ends
		time.Sleep(time.Second)
		synctest.Wait()
		verifyRefused(t, v, tok("ec256"))
		verifyOK(t, v, tok("ec256-b"))
		wantFetches(t, p, 3)
	})
}

// TestJWKSFailuresKeepKeys: whatever goes wrong with a refresh, the last good keys keep
// verifying, the failure is counted and logged on one line, with no key material.
func TestJWKSFailuresKeepKeys(t *testing.T) {
	set := func(t testing.TB) []byte {
		b, _ := json.Marshal(map[string]any{"keys": []json.RawMessage{jwkJSON(t, "ec256", "", "sig", nil)}})
		return b
	}
	tests := []struct {
		name string
		fail func(t testing.TB, s *testenv.IDPState)
		// takes is how long a failed refresh lasts.
		takes time.Duration
	}{
		{name: "status 500", fail: func(_ testing.TB, s *testenv.IDPState) { s.Status = 500 }},
		{name: "status 404", fail: func(_ testing.TB, s *testenv.IDPState) { s.Status = 404 }},
		{name: "connection refused", fail: func(_ testing.TB, s *testenv.IDPState) { s.Down = true }},
		{name: "not JSON", fail: func(_ testing.TB, s *testenv.IDPState) { s.Body = []byte("<html>maintenance</html>") }},
		{name: "JSON, not a set", fail: func(_ testing.TB, s *testenv.IDPState) { s.Body = []byte(`{"keys":"none"}`) }},
		{name: "empty set", fail: func(_ testing.TB, s *testenv.IDPState) { s.Body = []byte(`{"keys":[]}`) }},
		{name: "no usable key", fail: func(t testing.TB, s *testenv.IDPState) {
			s.Keys = []json.RawMessage{
				jwkJSON(t, "ec-enc", "", "enc", nil),
				testenv.JWK(t, octSecret, "oct", "", "", nil),
				json.RawMessage(`{"kty":"RSA","kid":"broken","n":"AQAB"}`),
				json.RawMessage(`{"kty":"EC","kid":"off-curve","crv":"P-256","x":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","y":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`),
				json.RawMessage(`{"kty":"OKP","kid":"x448","crv":"X448","x":"AAAA"}`),
			}
		}},
		{name: "body over 1 MiB", fail: func(t testing.TB, s *testenv.IDPState) {
			// A good set, then whitespace: its first MiB alone would parse.
			s.Body = append(set(t), strings.Repeat(" ", auth.MaxJWKSBytes)...)
		}},
		{name: "hangs", fail: func(_ testing.TB, s *testenv.IDPState) { s.Hang = true }, takes: auth.DefaultJWKSFetchTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, client := testenv.InProcessIDP()
				p.Set(func(s *testenv.IDPState) { s.Body = set(t); s.CacheControl = "max-age=60" })
				cfg := jwksConfig(p)
				cfg.JWKS.HTTPClient = client
				v, logs := newVerifier(t, cfg)
				synctest.Wait()
				tok := signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(time.Now(), nil))
				verifyOK(t, v, tok)
				started := time.Now()

				p.Set(func(s *testenv.IDPState) { s.Body = nil; s.Keys = nil; tt.fail(t, s) })
				time.Sleep(time.Minute + tt.takes)
				synctest.Wait()
				verifyOK(t, v, tok)
				st := v.JWKSStatus()[0]
				if st.Failures != 1 || st.Successes != 1 || st.Keys != 1 || !st.LastSuccess.Equal(started) {
					t.Fatalf("status %+v", st)
				}
				warns := logs.Lines("warn")
				if len(warns) != 1 {
					t.Fatalf("%d warnings, want 1:\n%s", len(warns), logs)
				}
				// Each retry fails again, counted and logged once.
				time.Sleep(time.Second + tt.takes)
				synctest.Wait()
				verifyOK(t, v, tok)
				if st := v.JWKSStatus()[0]; st.Failures != 2 || len(logs.Lines("warn")) != 2 {
					t.Fatalf("status %+v, log:\n%s", st, logs)
				}
				ec := key("ec256").public().(*ecdsa.PublicKey)
				for _, secret := range []string{tok, base64.RawURLEncoding.EncodeToString(ecX(t, ec)), "maintenance"} {
					if strings.Contains(logs.String(), secret) {
						t.Fatalf("log holds %q:\n%s", secret, logs)
					}
				}
				t.Log(warns[0])
			})
		})
	}
}

// ecX is the x coordinate of k, as its JWK holds it.
func ecX(t testing.TB, k *ecdsa.PublicKey) []byte {
	t.Helper()
	b, err := k.Bytes() // 0x04 || x || y
	if err != nil {
		t.Fatal(err)
	}
	return b[1 : 1+(len(b)-1)/2]
}

// TestJWKSFetchTimeoutBoundsRequests: a request that triggers a refresh of a hanging
// provider waits FetchTimeout at most.
func TestJWKSFetchTimeoutBoundsRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, client := testenv.InProcessIDP()
		p.Set(func(s *testenv.IDPState) { s.Keys = []json.RawMessage{jwkJSON(t, "ec256", "", "sig", nil)} })
		cfg := jwksConfig(p)
		cfg.JWKS.HTTPClient = client
		cfg.JWKS.FetchTimeout = 500 * time.Millisecond
		v, _ := newVerifier(t, cfg)
		synctest.Wait()
		p.Set(func(s *testenv.IDPState) { s.Hang = true })
		start := time.Now()
		verifyUnavailable(t, v, signKID(t, jwt.SigningMethodES256, key("ec256-b").priv, "ec256-b", idpClaims(start, nil)))
		if waited := time.Since(start); waited != cfg.JWKS.FetchTimeout {
			t.Fatalf("waited %s, want %s", waited, cfg.JWKS.FetchTimeout)
		}
	})
}

// TestJWKSStopsWithContext: the refresh loop ends with the verifier's context, and
// Close waits for it (the bubble fails the test if a goroutine is left).
func TestJWKSStopsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, client := testenv.InProcessIDP()
		p.Set(func(s *testenv.IDPState) { s.Keys = []json.RawMessage{jwkJSON(t, "ec256", "", "sig", nil)} })
		cfg := jwksConfig(p)
		cfg.JWKS.HTTPClient = client
		ctx, cancel := context.WithCancel(t.Context())
		v, err := auth.NewVerifier(ctx, zerolog.Nop(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		cancel()
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		wantFetches(t, p, 1)
		v.Close()

		v, err = auth.NewVerifier(t.Context(), zerolog.Nop(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		v.Close()
		v.Close() // idempotent
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		wantFetches(t, p, 2)
	})
}

// TestDiscovery: the set's URL comes from the issuer's discovery document, whose issuer
// must be the configured one exactly.
func TestDiscovery(t *testing.T) {
	tests := []struct {
		name      string
		issuer    string // configured; the provider is at http://idp.test
		docIssuer string
		jwksURI   string
		wantErr   bool
	}{
		{name: "happy path", issuer: "http://idp.test", docIssuer: "http://idp.test"},
		{name: "issuer with a trailing slash", issuer: "http://idp.test/", docIssuer: "http://idp.test/"},
		{name: "issuer mismatch", issuer: "http://idp.test", docIssuer: "http://evil.test", wantErr: true},
		{name: "issuer differs by a slash", issuer: "http://idp.test", docIssuer: "http://idp.test/", wantErr: true},
		{name: "jwks_uri not http", issuer: "http://idp.test", docIssuer: "http://idp.test", jwksURI: "file:///etc/jwks.json", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, client := testenv.InProcessIDP()
				p.Set(func(s *testenv.IDPState) {
					s.Keys = []json.RawMessage{jwkJSON(t, "ec256", "", "sig", nil)}
					s.Issuer, s.JWKSURI = tt.docIssuer, tt.jwksURI
				})
				cfg := auth.JWTConfig{Issuer: tt.issuer, Audience: "agentfy-api", Discovery: true, JWKS: auth.JWKSOptions{HTTPClient: client}}
				v, logs := newVerifier(t, cfg)
				synctest.Wait()
				tok := signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(time.Now(), func(c jwt.MapClaims) { c["iss"] = tt.issuer }))
				st := v.JWKSStatus()[0]
				if st.URL != "http://idp.test/.well-known/openid-configuration" {
					t.Fatalf("status URL %q", st.URL)
				}
				if tt.wantErr {
					if st.Failures != 1 || st.KeysURL != "" || len(logs.Lines("warn")) != 1 {
						t.Fatalf("status %+v, log:\n%s", st, logs)
					}
					verifyUnavailable(t, v, tok) // no key set could be had: unconfirmed
					if jwks, _ := p.Fetches(); jwks != 0 {
						t.Fatalf("jwks fetched %d times", jwks)
					}
					t.Log(logs.Lines("warn")[0])
					return
				}
				verifyOK(t, v, tok)
				if st.KeysURL != "http://idp.test/jwks.json" || st.Successes != 1 || st.Keys != 1 {
					t.Fatalf("status %+v", st)
				}
				// Refreshes fetch the set only: the URL is kept.
				time.Sleep(auth.DefaultJWKSRefresh)
				synctest.Wait()
				if jwks, discovery := p.Fetches(); jwks != 2 || discovery != 1 {
					t.Fatalf("fetches: jwks %d, discovery %d", jwks, discovery)
				}
			})
		})
	}
}

// TestDiscoveryRetried: discovery is retried in the background until the provider
// answers.
func TestDiscoveryRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, client := testenv.InProcessIDP()
		p.Set(func(s *testenv.IDPState) {
			s.Down = true
			s.Keys = []json.RawMessage{jwkJSON(t, "ec256", "", "sig", nil)}
		})
		v, _ := newVerifier(t, auth.JWTConfig{Issuer: "http://idp.test", Audience: "agentfy-api", Discovery: true, JWKS: auth.JWKSOptions{HTTPClient: client}})
		synctest.Wait()
		tok := signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(time.Now(), func(c jwt.MapClaims) { c["iss"] = "http://idp.test" }))
		verifyUnavailable(t, v, tok)
		p.Set(func(s *testenv.IDPState) { s.Down = false })
		time.Sleep(auth.DefaultJWKSMinRefresh)
		synctest.Wait()
		verifyOK(t, v, tok)
	})
}

// TestDiscoveryRealServer: discovery and the set over a real loopback connection.
func TestDiscoveryRealServer(t *testing.T) {
	clk := testenv.NewClock(now)
	p := testenv.ServeIDP(t)
	issuer := p.URL()
	p.Set(func(s *testenv.IDPState) {
		s.Issuer = issuer
		s.Keys = []json.RawMessage{jwkJSON(t, "rsa", "RS256", "sig", nil)}
	})
	v, _ := newVerifier(t, auth.JWTConfig{Issuer: issuer, Audience: "agentfy-api", Discovery: true, Now: clk.Now})
	verifyOK(t, v, signKID(t, jwt.SigningMethodRS256, key("rsa").priv, "rsa", idpClaims(now, func(c jwt.MapClaims) { c["iss"] = issuer })))
	if jwks, discovery := p.Fetches(); jwks != 1 || discovery != 1 {
		t.Fatalf("fetches: jwks %d, discovery %d", jwks, discovery)
	}
}

// TestVerifierSeveralSources: development HS256 tokens and a provider's tokens are both
// accepted by one verifier; development tokens never make the JWK set source fetch.
func TestVerifierSeveralSources(t *testing.T) {
	clk := testenv.NewClock(now)
	p := testenv.ServeIDP(t)
	p.Set(func(s *testenv.IDPState) { s.Keys = []json.RawMessage{jwkJSON(t, "ec256", "", "sig", nil)} })
	ext := jwksConfig(p)
	ext.Now = clk.Now
	ext.UserClaim = "email"
	dev := auth.JWTConfig{Issuer: "agentfy-dev", Audience: "agentfy-api", HS256Secret: secret, Now: clk.Now}
	v, _ := newVerifier(t, dev, ext)

	extTok := signKID(t, jwt.SigningMethodES256, key("ec256").priv, "ec256", idpClaims(now, func(c jwt.MapClaims) { c["email"] = "alice@example.com" }))
	if got, err := v.Verify(t.Context(), extTok); err != nil || got != "alice@example.com" {
		t.Fatalf("provider token: %q, %v", got, err)
	}
	devTok, err := auth.MintHS256(secret, "agentfy-dev", "agentfy-api", "u-bob", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		clk.Advance(auth.DefaultJWKSUnknownKIDInterval)
		if got, err := v.Verify(t.Context(), devTok); err != nil || got != "u-bob" {
			t.Fatalf("development token: %q, %v", got, err)
		}
		// An HS256 token with the provider's issuer and an unknown kid fetches nothing
		// either: the JWK set source admits asymmetric algorithms only.
		verifyRefused(t, v, signKID(t, jwt.SigningMethodHS256, secret, "new", idpClaims(now, nil)))
	}
	wantFetches(t, p, 1)
	if st := v.JWKSStatus(); len(st) != 1 {
		t.Fatalf("status %+v", st)
	}
}
