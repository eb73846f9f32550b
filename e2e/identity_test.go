package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/wire"
)

// TestRealOpenIDProvider plugs a real OpenID provider (Ory Hydra, on loopback) into a
// stack of two replicas through OpenID discovery, as a platform would, and runs the
// provider's life under views: its tokens view on both replicas beside the stack's own
// development tokens; a key rotated at the provider verifies at once, with no restart;
// a key removed stops verifying within the cache period; with the provider down the
// known keys keep working and an unknown kid is answered at once, 503
// identity_unavailable (it may be a key the provider rotated to; only the provider can
// tell, and it does not answer).
func TestRealOpenIDProvider(t *testing.T) {
	h := testenv.StartHydra(t)
	ctx := testenv.Context(t, 3*time.Minute)
	// A short cache period so the test sees a removal; production clamps it to 30 s–1 h.
	const period = 2 * time.Second
	provider := auth.JWTConfig{
		Issuer: h.Issuer, Audience: "agentfy-api", Discovery: true, Leeway: 30 * time.Second,
		JWKS: auth.JWKSOptions{MinRefresh: period, MaxRefresh: period, DefaultRefresh: period},
	}
	s, c := providerStack(ctx, t, provider)

	token := func(clientID, audience string) string {
		t.Helper()
		secret, err := h.CreateClient(ctx, clientID, audience)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := h.Token(ctx, clientID, secret, audience)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	// view asks replica r for agent-scout's view with bearer; a frame is "frame".
	view := func(r int, bearer string) string {
		t.Helper()
		c.OpenGate(t, "agent-scout")
		a := c.Do(t, http.MethodGet, c.ViewURL(r, "agent-scout"), bearer, nil)
		if a.Status == http.StatusOK {
			if res := a.Result(t); res.Live && res.Page != nil {
				return "frame"
			}
		}
		return a.Summary()
	}
	both := func(bearer string) string { return view(0, bearer) + " / " + view(1, bearer) }

	// u-alice's token from the provider (sub = the client id), beside a development one.
	alice := token("u-alice", "agentfy-api")
	if got := both(alice); got != "frame / frame" {
		t.Fatalf("the provider's token: %s", got)
	}
	if got := both(c.Token(t, "u-alice")); got != "frame / frame" {
		t.Fatalf("a development token beside the provider: %s", got)
	}
	if got := view(0, token("u-carol", "agentfy-api")); !strings.HasPrefix(got, "404") {
		t.Fatalf("the provider's token of another team's member: %s, want 404", got)
	}
	if got := view(1, token("u-bob", "another-api")); !strings.HasPrefix(got, "401") {
		t.Fatalf("the provider's token for another audience: %s, want 401", got)
	}

	// Rotation at the provider: a new ES256 key signs the next token; both replicas
	// verify it at its first use (an unknown kid triggers a refresh), nothing restarted.
	kid, err := h.RotateKey(ctx, "ES256")
	if err != nil {
		t.Fatal(err)
	}
	alice2 := token("u-alice-2", "agentfy-api")
	if err := s.Dir.PutUser(ctx, directory.User{ID: "u-alice-2", Name: "Alice's second client"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Dir.AddMember(ctx, "team-atlas", "u-alice-2"); err != nil {
		t.Fatal(err)
	}
	if header(t, alice2)["kid"] != kid || header(t, alice2)["alg"] != "ES256" {
		t.Fatalf("the provider signed with %v, want the new key %s", header(t, alice2), kid)
	}
	first := time.Now()
	if sub, err := s.Replicas[0].JWT.Verify(ctx, alice2); err != nil || sub != "u-alice-2" {
		t.Fatalf("replica A verifying the rotated key's first token: %q %v", sub, err)
	}
	t.Logf("replica A verified the rotated key's first token in %v (its unknown kid fetched the set)", time.Since(first).Round(time.Millisecond))
	if got := both(alice2); got != "frame / frame" {
		t.Fatalf("a token of the rotated key: %s", got)
	}

	// The first key removed at the provider: its tokens stop verifying within the cache
	// period on both replicas.
	removed := time.Now()
	if err := h.DeleteKey(ctx, header(t, alice)["kid"].(string)); err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		testenv.WaitFor(t, 3*period+auth.DefaultJWKSFetchTimeout, "the removed key refused", func() bool {
			return strings.HasPrefix(view(r, alice), "401")
		})
	}
	t.Logf("a removed key was refused on both replicas %v after the removal (cache period %v)", time.Since(removed).Round(time.Millisecond), period)
	if got := both(alice2); got != "frame / frame" {
		t.Fatalf("the remaining key after the removal: %s", got)
	}

	// The provider down: the known key keeps verifying through failed refreshes, and a
	// token with a kid the last set lacks is 503 identity_unavailable at once.
	h.Stop()
	failures := func() uint64 {
		var n uint64
		for _, r := range s.Replicas {
			for _, st := range r.JWT.JWKSStatus() {
				n += st.Failures
			}
		}
		return n
	}
	before := failures()
	testenv.WaitFor(t, 3*period+2*auth.DefaultJWKSFetchTimeout, "a failed refresh on each replica", func() bool { return failures() >= before+2 })
	if got := both(alice2); got != "frame / frame" {
		t.Fatalf("the known key with the provider down: %s", got)
	}
	forged := forgedToken(t, h.Issuer)
	start := time.Now()
	if a := c.Do(t, http.MethodGet, c.ViewURL(0, "agent-scout"), forged, nil); a.Status != http.StatusServiceUnavailable || !strings.Contains(a.Body, `"code":"`+wire.ReasonIdentityUnavailable+`"`) {
		t.Fatalf("an unknown kid with the provider down: %d %s, want 503 %s", a.Status, a.Body, wire.ReasonIdentityUnavailable)
	}
	if took := time.Since(start); took > auth.DefaultJWKSFetchTimeout+time.Second {
		t.Fatalf("an unknown kid with the provider down took %v", took)
	}
	metrics := c.Get(t, s.Replicas[0].MetricsURL, "/metrics", "")
	for _, want := range []string{`agentfy_jwks_keys{source="1"} `, `agentfy_jwks_age_seconds{source="1"} `, `agentfy_jwks_refreshes_total{result="failed",source="1"} `} {
		if !strings.Contains(metrics.Body, want) || strings.Contains(metrics.Body, want+"0\n") || strings.Contains(metrics.Body, want+"-1\n") {
			t.Errorf("/metrics lacks a positive %s", want)
		}
	}
	if strings.Contains(metrics.Body, h.Issuer) {
		t.Error("/metrics names the provider's URL")
	}
}

// providerStack starts a stack of its own whose replicas take provider's tokens beside
// their development ones, with agent-scout's worker on replica B and a tab open on the
// demo site.
func providerStack(ctx context.Context, t *testing.T, provider auth.JWTConfig) (*stack.Stack, *stacktest.Client) {
	t.Helper()
	s := stacktest.Start(t, stack.Options{ExtraJWT: []auth.JWTConfig{provider}, Log: zerolog.Nop()}).St
	stacktest.LiveSession(ctx, t, s, "agent-scout", stack.SessionOptions{Replica: 1}, "/")
	return s, &stacktest.Client{St: s, Validator: client.Validator, Timeout: time.Minute}
}

// header decodes a JWT's header.
func header(t *testing.T, token string) map[string]any {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// forgedToken is a token of the right issuer and audience signed by a key the provider
// never had, under a kid nobody knows.
func forgedToken(t *testing.T, issuer string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return stacktest.SignJWT(t, jwt.SigningMethodES256, key, "forged-kid", jwt.MapClaims{
		"iss": issuer, "aud": []string{"agentfy-api"}, "sub": "u-alice", "exp": time.Now().Add(time.Hour).Unix(),
	})
}

// TestIdentityProviderOutage: the real provider (Ory Hydra, its state on disk) stopped
// for longer than a 10-s staleness bound answers its users' views 503
// identity_unavailable with Retry-After on both replicas — never 401, which signs a user
// out — while the stack's development tokens keep viewing; started again, its tokens
// view again on both replicas with nobody doing anything.
func TestIdentityProviderOutage(t *testing.T) {
	h := testenv.StartPersistentHydra(t)
	ctx := testenv.Context(t, 3*time.Minute)
	const period = 2 * time.Second
	provider := auth.JWTConfig{
		Issuer: h.Issuer, Audience: "agentfy-api", Discovery: true, Leeway: 30 * time.Second,
		JWKS: stacktest.ProviderJWKS(period),
	}
	s, c := providerStack(ctx, t, provider)
	secret, err := h.CreateClient(ctx, "u-alice", "agentfy-api")
	if err != nil {
		t.Fatal(err)
	}
	alice, err := h.Token(ctx, "u-alice", secret, "agentfy-api")
	if err != nil {
		t.Fatal(err)
	}
	dev := c.Token(t, "u-alice")
	// view asks replica r for agent-scout's view; a frame is "frame", anything else its
	// status and body.
	view := func(r int, bearer string) stacktest.Response {
		t.Helper()
		c.OpenGate(t, "agent-scout")
		return c.Do(t, http.MethodGet, c.ViewURL(r, "agent-scout"), bearer, nil)
	}
	isFrame := func(a stacktest.Response) bool {
		if a.Status != http.StatusOK {
			return false
		}
		res := a.Result(t)
		return res.Live && res.Page != nil
	}
	for r := range 2 {
		if a := view(r, alice); !isFrame(a) {
			t.Fatalf("replica %d, the provider's token before the outage: %s", r, a.Summary())
		}
	}

	// Down past the bound: every answer on the way is a frame (the last keys still
	// good) or identity_unavailable, never a 401, and it ends as identity_unavailable
	// on both replicas.
	h.Stop()
	stopped := time.Now()
	for r := range 2 {
		testenv.WaitFor(t, auth.MinJWKSMaxStale+3*period+2*auth.DefaultJWKSFetchTimeout, "identity_unavailable on replica "+string(rune('A'+r)), func() bool {
			a := view(r, alice)
			switch {
			case isFrame(a):
				return false
			case a.Status == http.StatusServiceUnavailable && strings.Contains(a.Body, `"code":"`+wire.ReasonIdentityUnavailable+`"`):
				if a.Header.Get("Retry-After") == "" {
					t.Fatalf("replica %d: 503 %s without Retry-After", r, wire.ReasonIdentityUnavailable)
				}
				// Not before the bound: the last keys fetched verify until they are
				// older than it.
				if age := time.Since(s.Replicas[r].JWT.JWKSStatus()[0].LastSuccess); age < auth.MinJWKSMaxStale {
					t.Fatalf("replica %d: %s with keys %v old, within the %v bound", r, wire.ReasonIdentityUnavailable, age, auth.MinJWKSMaxStale)
				}
				return true
			default:
				t.Fatalf("replica %d, the provider down %v: %s, want a frame or 503 %s", r, time.Since(stopped).Round(time.Millisecond), a.Summary(), wire.ReasonIdentityUnavailable)
				return false
			}
		})
	}
	t.Logf("identity_unavailable on both replicas %v after the provider stopped (bound %v)", time.Since(stopped).Round(time.Millisecond), auth.MinJWKSMaxStale)
	for r := range 2 {
		if a := view(r, dev); !isFrame(a) {
			t.Fatalf("replica %d, a development token during the outage: %s", r, a.Summary())
		}
	}
	metrics := c.Get(t, s.Replicas[0].MetricsURL, "/metrics", "")
	if !strings.Contains(metrics.Body, `agentfy_identity_unavailable_total{route="/v1/agents/:id/worker/view"} `) ||
		!strings.Contains(metrics.Body, `agentfy_view_unavailable_total{reason="identity_unavailable",route="/v1/agents/:id/worker/view"} `) {
		t.Error("/metrics does not count identity_unavailable")
	}

	// Back, the same provider: its tokens view again on both replicas, nothing done.
	h.Restart(t)
	restarted := time.Now()
	for r := range 2 {
		testenv.WaitFor(t, 3*period+2*auth.DefaultJWKSFetchTimeout, "the provider's token viewing again on replica "+string(rune('A'+r)), func() bool {
			a := view(r, alice)
			if a.Status == http.StatusUnauthorized {
				t.Fatalf("replica %d after the restart: %s", r, a.Summary())
			}
			return isFrame(a)
		})
	}
	t.Logf("frames again on both replicas %v after the provider came back", time.Since(restarted).Round(time.Millisecond))
}
