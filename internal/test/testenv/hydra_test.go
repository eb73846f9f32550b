package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/agentfy/agentfy/internal/dev/servers"
)

// TestHydraBinary builds the binary if needed (scripts/setup.sh runs this test alone
// to prebuild it) and checks that it is the pinned release.
func TestHydraBinary(t *testing.T) {
	bin := HydraBinary(t)
	dir, err := servers.ToolDir("hydra")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "github.com/ory/hydra/v2 " + HydraVersion; !strings.Contains(string(gomod), want) {
		t.Errorf("internal/tools/hydra/go.mod does not require %s", want)
	}
	out, err := exec.CommandContext(Context(t, 30*time.Second), bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("hydra version: %v\n%s", err, out)
	}
	if got := versionLine(string(out)); got != HydraVersion {
		t.Errorf("hydra version says %q, want %q:\n%s", got, HydraVersion, out)
	}
}

func versionLine(out string) string {
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(line, "Version:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestHydra proves the harness: Hydra's tokens verify against its JWKS with
// golang-jwt, before and after a rotation to ES256, and a deleted key leaves the JWKS.
func TestHydra(t *testing.T) {
	start := time.Now()
	h := StartHydra(t)
	t.Logf("StartHydra: ready in %v", time.Since(start).Round(time.Millisecond))
	ctx := Context(t, time.Minute)
	const client, audience = "u-alice", "agentfy-api"

	secret, err := h.CreateClient(ctx, client, audience)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.CreateClient(ctx, client, audience); err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("second CreateClient %s: %v, want a 409", client, err)
	}
	token := func() string {
		t.Helper()
		tok, err := h.Token(ctx, client, secret, audience)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	// The discovery document names the issuer and JWKS the harness reports.
	var discovery struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(get(ctx, t, h.PublicURL+"/.well-known/openid-configuration"), &discovery); err != nil {
		t.Fatal(err)
	}
	if discovery.Issuer != h.Issuer || discovery.JWKSURI != h.JWKSURL() {
		t.Errorf("discovery: issuer %q, jwks_uri %q; want %q, %q", discovery.Issuer, discovery.JWKSURI, h.Issuer, h.JWKSURL())
	}

	// The first token: RS256, by the generated key, with the claims a resource server
	// checks.
	first := token()
	keys := fetchJWKS(ctx, t, h)
	header, claims := verify(t, first, keys, h.Issuer, audience)
	t.Logf("first token: header %v, claims %v", header, claims)
	if header["alg"] != "RS256" || header["typ"] != "JWT" {
		t.Errorf("header %v, want alg RS256, typ JWT", header)
	}
	if claims["sub"] != client || claims["client_id"] != client || claims["iss"] != h.Issuer ||
		fmt.Sprint(claims["aud"]) != "["+audience+"]" {
		t.Errorf("claims %v, want sub and client_id %s, iss %s, aud [%s]", claims, client, h.Issuer, audience)
	}
	if exp, iat := claims["exp"].(float64), claims["iat"].(float64); exp-iat != time.Hour.Seconds() {
		t.Errorf("lifetime %v s, want one hour", exp-iat)
	}
	firstKid := header["kid"]

	// A token with a changed signature does not verify: the check above is real.
	if _, err := parse(first[:len(first)-4]+flip(first[len(first)-4:]), keys, h.Issuer, audience); err == nil {
		t.Error("a tampered token verified")
	}

	// Rotation: the new ES256 key signs the very next token and joins the JWKS; the
	// token signed before still verifies.
	esKid, err := h.RotateKey(ctx, "ES256")
	if err != nil {
		t.Fatal(err)
	}
	keys = fetchJWKS(ctx, t, h)
	header, _ = verify(t, token(), keys, h.Issuer, audience)
	if header["alg"] != "ES256" || header["kid"] != esKid {
		t.Errorf("after RotateKey: header %v, want alg ES256, kid %s", header, esKid)
	}
	verify(t, first, keys, h.Issuer, audience)

	// A kid of our choosing, once.
	const chosen = "test-chosen-kid"
	if kid, err := h.RotateKeyWithKID(ctx, "ES256", chosen); err != nil || kid != chosen {
		t.Fatalf("RotateKeyWithKID: %q, %v; want %q", kid, err, chosen)
	}
	if _, err := h.RotateKeyWithKID(ctx, "ES256", chosen); err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("second RotateKeyWithKID %s: %v, want a 409", chosen, err)
	}
	byChosen := token()
	if header, _ := verify(t, byChosen, fetchJWKS(ctx, t, h), h.Issuer, audience); header["kid"] != chosen {
		t.Errorf("header %v, want kid %s", header, chosen)
	}

	// Deleting the signing key: it leaves the JWKS at once, its tokens no longer verify,
	// and the newest remaining key signs again.
	if err := h.DeleteKey(ctx, chosen); err != nil {
		t.Fatal(err)
	}
	keys = fetchJWKS(ctx, t, h)
	if _, ok := keys[chosen]; ok {
		t.Errorf("deleted kid %s is still in the JWKS", chosen)
	}
	if _, ok := keys[firstKid.(string)]; !ok {
		t.Errorf("kid %s left the JWKS", firstKid)
	}
	if _, err := parse(byChosen, keys, h.Issuer, audience); err == nil {
		t.Error("a token of a deleted key verified")
	}
	if header, _ := verify(t, token(), keys, h.Issuer, audience); header["kid"] != esKid {
		t.Errorf("after DeleteKey: header %v, want kid %s", header, esKid)
	}
	if err := h.DeleteKey(ctx, "no-such-kid"); err != nil {
		t.Errorf("DeleteKey of an unknown kid: %v (Hydra answers 204)", err)
	}

	// Refusals.
	if _, err := h.Token(ctx, client, secret+"x", audience); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("Token with a wrong secret: %v, want a 401", err)
	}
	if _, err := h.Token(ctx, client, secret, "other-api"); err == nil {
		t.Error("Token for an audience the client may not ask for succeeded")
	}
	if _, err := h.RotateKey(ctx, "HS256"); err == nil {
		t.Error("RotateKey HS256 succeeded")
	}
}

// TestHydraStop: Stop takes the provider down entirely, and Restart gives a fresh one
// on the same ports — no clients, new keys.
func TestHydraStop(t *testing.T) {
	h := StartHydra(t)
	ctx := Context(t, time.Minute)
	secret, err := h.CreateClient(ctx, "u-bob", "agentfy-api")
	if err != nil {
		t.Fatal(err)
	}
	before := fetchJWKS(ctx, t, h)
	pid := h.Pid()

	start := time.Now()
	h.Stop()
	t.Logf("Stop: %v", time.Since(start).Round(time.Millisecond))
	if Alive(pid) || len(Descendants(pid)) > 0 || h.Pid() != 0 {
		t.Fatalf("hydra %d still alive (descendants %v) after Stop", pid, Descendants(pid))
	}
	if jwksAnswers(ctx, h) {
		t.Fatal("the JWKS answers after Stop")
	}
	h.Stop() // a second Stop is harmless

	start = time.Now()
	h.Restart(t)
	t.Logf("Restart: ready in %v", time.Since(start).Round(time.Millisecond))
	if h.Pid() == pid || h.Pid() == 0 {
		t.Errorf("pid %d after Restart, was %d", h.Pid(), pid)
	}
	if _, err := h.Token(ctx, "u-bob", secret, "agentfy-api"); err == nil {
		t.Error("a client of the stopped provider got a token from the fresh one")
	}
	after := fetchJWKS(ctx, t, h)
	for kid := range after {
		if _, ok := before[kid]; ok {
			t.Errorf("kid %s survived Restart", kid)
		}
	}
	secret, err = h.CreateClient(ctx, "u-bob", "agentfy-api")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := h.Token(ctx, "u-bob", secret, "agentfy-api")
	if err != nil {
		t.Fatal(err)
	}
	verify(t, tok, after, h.Issuer, "agentfy-api")
}

// fetchJWKS reads Hydra's JWKS into public keys by kid (RSA and EC, all the test
// needs), and checks that it may not be cached.
func fetchJWKS(ctx context.Context, t *testing.T, h *Hydra) map[string]any {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.JWKSURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	// Hydra forbids caching its JWKS; a verifier must choose its own refresh policy.
	if got, want := resp.Header.Get("Cache-Control"), "private, no-cache, no-store, must-revalidate"; resp.StatusCode != http.StatusOK || got != want {
		t.Fatalf("GET %s: status %d, Cache-Control %q; want 200, %q", h.JWKSURL(), resp.StatusCode, got, want)
	}
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Kid string `json:"kid"`
			Alg string `json:"alg"`
			Crv string `json:"crv"`
			N   string `json:"n"`
			E   string `json:"e"`
			X   string `json:"x"`
			Y   string `json:"y"`
			D   string `json:"d"`
		} `json:"keys"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, bodyLimit)).Decode(&set); err != nil {
		t.Fatal(err)
	}
	keys := map[string]any{}
	for _, k := range set.Keys {
		if k.D != "" {
			t.Fatalf("the public JWKS holds the private part of %s", k.Kid)
		}
		switch k.Kty {
		case "RSA":
			n, e := b64(t, k.N), new(big.Int).SetBytes(b64(t, k.E))
			if !e.IsInt64() || e.Int64() < 3 || len(n) < 256 {
				t.Fatalf("weak RSA key %s", k.Kid)
			}
			keys[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(e.Int64())}
		case "EC":
			curve := map[string]elliptic.Curve{"P-256": elliptic.P256(), "P-384": elliptic.P384(), "P-521": elliptic.P521()}[k.Crv]
			if curve == nil {
				t.Fatalf("key %s: curve %q", k.Kid, k.Crv)
			}
			size := (curve.Params().BitSize + 7) / 8
			x, y := b64(t, k.X), b64(t, k.Y)
			if len(x) != size || len(y) != size {
				t.Fatalf("key %s: coordinates of %d and %d bytes, want %d", k.Kid, len(x), len(y), size)
			}
			pub, err := ecdsa.ParseUncompressedPublicKey(curve, slices.Concat([]byte{4}, x, y))
			if err != nil {
				t.Fatalf("key %s: %v", k.Kid, err)
			}
			keys[k.Kid] = pub
		default:
			t.Fatalf("key %s: kty %q", k.Kid, k.Kty)
		}
	}
	return keys
}

func b64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// verify fails the test unless token verifies; it returns the header and claims.
func verify(t *testing.T, token string, keys map[string]any, issuer, audience string) (map[string]any, jwt.MapClaims) {
	t.Helper()
	tok, err := parse(token, keys, issuer, audience)
	if err != nil {
		t.Fatalf("token does not verify: %v", err)
	}
	return tok.Header, tok.Claims.(jwt.MapClaims)
}

func parse(token string, keys map[string]any, issuer, audience string) (*jwt.Token, error) {
	return jwt.Parse(token, func(tok *jwt.Token) (any, error) {
		kid, _ := tok.Header["kid"].(string)
		if k, ok := keys[kid]; ok {
			return k, nil
		}
		return nil, fmt.Errorf("unknown kid %q", kid)
	},
		jwt.WithValidMethods([]string{"RS256", "ES256"}),
		jwt.WithIssuer(issuer), jwt.WithAudience(audience),
		jwt.WithExpirationRequired(), jwt.WithIssuedAt())
}

// flip changes every character of a base64url string into another one.
func flip(s string) string {
	return strings.Map(func(r rune) rune {
		if r == 'A' {
			return 'B'
		}
		return 'A'
	}, s)
}

func get(ctx context.Context, t *testing.T, url string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, bodyLimit))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return b
}

// TestPersistentHydraRestart: a persistent provider comes back from Restart as itself —
// the same signing keys, and a client made before still gets tokens that verify.
func TestPersistentHydraRestart(t *testing.T) {
	h := StartPersistentHydra(t)
	ctx := Context(t, time.Minute)
	secret, err := h.CreateClient(ctx, "u-bob", "agentfy-api")
	if err != nil {
		t.Fatal(err)
	}
	before := fetchJWKS(ctx, t, h)
	h.Stop()
	if jwksAnswers(ctx, h) {
		t.Fatal("the JWKS answers after Stop")
	}
	h.Restart(t)
	after := fetchJWKS(ctx, t, h)
	for kid := range before {
		if _, ok := after[kid]; !ok {
			t.Errorf("kid %s lost in Restart", kid)
		}
	}
	tok, err := h.Token(ctx, "u-bob", secret, "agentfy-api")
	if err != nil {
		t.Fatalf("the client made before the restart: %v", err)
	}
	verify(t, tok, after, h.Issuer, "agentfy-api")
}

// bodyLimit bounds the answers of Hydra the tests read.
const bodyLimit = 1 << 20 // 1 MiB

// jwksAnswers reports whether h's JWKS answers 200 within ctx.
func jwksAnswers(ctx context.Context, h *Hydra) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.JWKSURL(), nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
