package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"
)

// Limits on what an identity provider sends.
const (
	// MaxJWKSBytes bounds a JWK set response; a longer one is a failed refresh.
	MaxJWKSBytes = 1 << 20 // 1 MiB
	// MaxDiscoveryBytes bounds an OpenID discovery document.
	MaxDiscoveryBytes = 256 << 10 // 256 KiB
	// MinRSABits: a JWK set's RSA keys shorter than this are ignored.
	MinRSABits = 2048
)

// Defaults of JWKSOptions.
const (
	DefaultJWKSMinRefresh         = 30 * time.Second
	DefaultJWKSMaxRefresh         = time.Hour
	DefaultJWKSRefresh            = 5 * time.Minute
	DefaultJWKSUnknownKIDInterval = 10 * time.Second
	DefaultJWKSFetchTimeout       = 2 * time.Second
	DefaultJWKSMaxStale           = 24 * time.Hour
	// MinJWKSMaxStale is the shortest MaxStale allowed: tests and operators who want
	// an outage to show within seconds use it.
	MinJWKSMaxStale = 10 * time.Second
)

// maxJWKSRedirects is how many same-origin redirects a key set or discovery fetch
// follows; a redirect to another origin is never followed.
const maxJWKSRedirects = 3

// jwksFirstRetry is the wait before the first retry of a failed refresh; each further
// failure doubles it, up to MinRefresh.
const jwksFirstRetry = time.Second

// discoveryPath is appended to an issuer to find its OpenID discovery document.
const discoveryPath = "/.well-known/openid-configuration"

// JWKSOptions tune the cache of a JWK set. Zero values mean the defaults.
type JWKSOptions struct {
	// MinRefresh and MaxRefresh clamp the refresh period the response's
	// "Cache-Control: max-age" asks for (defaults 30 s and 1 h).
	MinRefresh, MaxRefresh time.Duration
	// DefaultRefresh is the refresh period when the response has no max-age (default
	// 5 min; clamped like max-age).
	DefaultRefresh time.Duration
	// UnknownKIDInterval: a token whose "kid" is not in the set triggers a refresh at
	// most once per this interval (default 10 s); other such tokens are refused at once.
	UnknownKIDInterval time.Duration
	// FetchTimeout bounds one refresh, discovery included (default 2 s). No request
	// waits on a refresh longer than this.
	FetchTimeout time.Duration
	// MaxStale is how long the last good key set keeps verifying while refreshes fail
	// (default 24 h, at least MinJWKSMaxStale); after that the source's tokens are
	// ErrIdentityUnavailable until a refresh succeeds. It must be longer than
	// MaxRefresh; when MaxRefresh is left to its default and MaxStale is not longer
	// than it, MaxRefresh becomes half of MaxStale (and MinRefresh at most that), so a
	// short bound is refreshed in time.
	MaxStale time.Duration
	// HTTPClient fetches the set and the discovery document; nil means a client with
	// FetchTimeout as its timeout. Its redirect policy is replaced: a redirect to
	// another origin (scheme, host and port) is refused, at most maxJWKSRedirects
	// same-origin ones are followed.
	HTTPClient *http.Client
	// Now is the cache's clock; nil means JWTConfig.Now, then time.Now.
	Now func() time.Time
}

// JWKSStatus describes one JWK set source, for metrics.
type JWKSStatus struct {
	// URL names the source: the configured JWK set URL, or with discovery the
	// discovery document's URL. It is stable, for a metrics label. A password in a URL
	// is shown as "xxxxx".
	URL string
	// KeysURL is where the keys are fetched: the configured JWK set URL, or the
	// discovered "jwks_uri" ("" until discovery succeeds).
	KeysURL string
	// Keys is the number of keys that verify now: 0 before the first successful fetch
	// and once the last good set is older than MaxStale.
	Keys int
	// LastSuccess is the time of the last successful fetch (zero if none).
	LastSuccess time.Time
	// Successes and Failures count refreshes since the verifier started.
	Successes, Failures uint64
}

// jwksCache keeps one source's JWK set fresh. One goroutine refreshes it when the
// period the provider asked for is over, or sooner on failure; a token with an unknown
// kid may trigger one more refresh per UnknownKIDInterval. Both share the fetch in
// flight, so there is at most one at a time.
//
// It is written here rather than taken from github.com/MicahParks/keyfunc/v3 and
// github.com/MicahParks/jwkset (go-jose parses each key): their refresh runs on a
// fixed ticker that cannot see Cache-Control, back off or record a success (so no
// staleness bound), and their unknown-kid refresh neither joins a fetch in flight
// nor tells a failed refresh from an absent kid (the 503/401 split).
// docs/platform.md lists every behaviour they lack.
type jwksCache struct {
	name         string // JWKSStatus.URL, password redacted
	issuer       string
	discoveryURL string // "" without discovery
	opts         JWKSOptions
	client       *http.Client
	now          func() time.Time
	log          zerolog.Logger
	wg           *sync.WaitGroup // the verifier's; counts the refresh loop and fetches
	// rescheduled wakes the refresh loop when a fetch it did not start (an unknown
	// kid's) moved the next refresh, so that a failure's retry is kept, not the time
	// the loop was sleeping towards. Buffered 1; a send never blocks.
	rescheduled chan struct{}

	ctx context.Context // the verifier's lifetime; set once by start

	mu sync.Mutex
	// Guarded by mu.
	closed         bool
	keysURL        string
	set            *keySet // nil until the first successful fetch
	fetched        time.Time
	next           time.Time // when the refresh loop fetches again
	failStreak     int
	lastUnknownKID time.Time
	inflight       chan struct{} // closed when the fetch in flight ends; nil if none
	lastFailed     bool          // the last fetch that ended failed
	successes      uint64
	failures       uint64
}

// keySet is a parsed JWK set: only the keys that may verify a token.
type keySet struct {
	byKID map[string][]verifyKey
	all   []verifyKey
}

// verifyKey is a usable JWK: its public key and the algorithms it verifies.
type verifyKey struct {
	key  any // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
	algs []string
}

func newJWKSCache(cfg *JWTConfig, log zerolog.Logger, wg *sync.WaitGroup) (*jwksCache, error) {
	o := cfg.JWKS
	for _, d := range []time.Duration{o.MinRefresh, o.MaxRefresh, o.DefaultRefresh, o.UnknownKIDInterval, o.FetchTimeout, o.MaxStale} {
		if d < 0 {
			return nil, errors.New("auth: jwks durations must not be negative")
		}
	}
	if o.MaxStale != 0 && o.MaxStale < MinJWKSMaxStale {
		return nil, fmt.Errorf("auth: jwks MaxStale %s is shorter than %s", o.MaxStale, MinJWKSMaxStale)
	}
	if o.MaxRefresh == 0 && o.MaxStale != 0 && o.MaxStale <= DefaultJWKSMaxRefresh {
		// A short bound: refresh at least twice within it.
		o.MaxRefresh = o.MaxStale / 2
		if o.MinRefresh == 0 {
			o.MinRefresh = min(DefaultJWKSMinRefresh, o.MaxRefresh)
		}
	}
	setDefault(&o.MinRefresh, DefaultJWKSMinRefresh)
	setDefault(&o.MaxRefresh, DefaultJWKSMaxRefresh)
	setDefault(&o.DefaultRefresh, DefaultJWKSRefresh)
	setDefault(&o.UnknownKIDInterval, DefaultJWKSUnknownKIDInterval)
	setDefault(&o.FetchTimeout, DefaultJWKSFetchTimeout)
	setDefault(&o.MaxStale, DefaultJWKSMaxStale)
	if o.MinRefresh > o.MaxRefresh {
		return nil, fmt.Errorf("auth: jwks MinRefresh %s is longer than MaxRefresh %s", o.MinRefresh, o.MaxRefresh)
	}
	if o.MaxStale <= o.MaxRefresh {
		return nil, fmt.Errorf("auth: jwks MaxStale %s must be longer than MaxRefresh %s", o.MaxStale, o.MaxRefresh)
	}
	o.DefaultRefresh = min(max(o.DefaultRefresh, o.MinRefresh), o.MaxRefresh)
	c := &jwksCache{issuer: cfg.Issuer, opts: o, now: o.Now, wg: wg, keysURL: cfg.JWKSURL, rescheduled: make(chan struct{}, 1)}
	if o.HTTPClient != nil {
		client := *o.HTTPClient
		c.client = &client
	} else {
		c.client = &http.Client{Timeout: o.FetchTimeout}
	}
	c.client.CheckRedirect = sameOriginRedirect
	if c.now == nil {
		c.now = cfg.Now
	}
	if c.now == nil {
		c.now = time.Now
	}
	if cfg.Discovery {
		if err := checkHTTPURL(cfg.Issuer); err != nil {
			return nil, fmt.Errorf("auth: jwt issuer for discovery: %w", err)
		}
		c.discoveryURL = strings.TrimSuffix(cfg.Issuer, "/") + discoveryPath
		c.name = redact(c.discoveryURL)
	} else {
		if err := checkHTTPURL(cfg.JWKSURL); err != nil {
			return nil, fmt.Errorf("auth: jwks url: %w", err)
		}
		c.name = redact(cfg.JWKSURL)
	}
	c.log = log.With().Str("jwks", c.name).Logger()
	return c, nil
}

// errCrossOriginRedirect is a redirect of a key set or discovery fetch to another
// origin: following it would let whoever answers the configured URL name the keys.
var errCrossOriginRedirect = errors.New("redirect to another origin refused")

// sameOriginRedirect is the fetches' redirect policy: follow at most maxJWKSRedirects
// redirects, each to the origin (scheme, host and port) of the first request.
func sameOriginRedirect(req *http.Request, via []*http.Request) error {
	if origin(req.URL) != origin(via[0].URL) {
		return fmt.Errorf("%w: %.200s", errCrossOriginRedirect, req.URL.Redacted())
	}
	if len(via) > maxJWKSRedirects {
		return fmt.Errorf("more than %d redirects", maxJWKSRedirects)
	}
	return nil
}

// origin is a URL's scheme, host and port, the port made explicit.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

func setDefault(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

func checkHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("not a URL")
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%.200q is not an absolute http(s) URL", redact(s))
	}
	return nil
}

// redact hides a password a URL might carry, for logs and errors.
func redact(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}

// start begins the first fetch, so that a token verified as soon as NewVerifier returns
// waits for it rather than starting another, and runs the refresh loop until ctx ends.
func (c *jwksCache) start(ctx context.Context) {
	c.ctx = ctx
	c.mu.Lock()
	c.beginFetch(ctx)
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.run(ctx)
	}()
}

// close stops new fetches from starting, so that the verifier may wait for those in
// flight.
func (c *jwksCache) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}

// run waits for the fetch start began, then fetches whenever the refresh time is
// reached. A fetch a request started meanwhile moves the refresh time on.
func (c *jwksCache) run(ctx context.Context) {
	for ctx.Err() == nil {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		wait := c.next.Sub(c.now())
		done := c.inflight
		if done == nil && wait <= 0 {
			done = c.beginFetch(ctx)
		}
		c.mu.Unlock()
		if done != nil {
			select {
			case <-ctx.Done():
			case <-done:
			}
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-c.rescheduled:
		}
		t.Stop()
	}
}

// refreshForUnknownKID joins the fetch in flight, or starts one if no unknown kid did
// within UnknownKIDInterval, and waits for its end or ctx's. It reports false when no
// fetch ended for the caller: rate limited, the cache closed, or ctx ended.
func (c *jwksCache) refreshForUnknownKID(ctx context.Context) bool {
	c.mu.Lock()
	if c.closed || c.ctx.Err() != nil {
		c.mu.Unlock()
		return false
	}
	done := c.inflight
	if done == nil {
		now := c.now()
		if !c.lastUnknownKID.IsZero() && now.Sub(c.lastUnknownKID) < c.opts.UnknownKIDInterval {
			c.mu.Unlock()
			return false
		}
		c.lastUnknownKID = now
		// The fetch runs under the verifier's lifetime, not the request's: a request
		// that gives up waiting does not abort the fetch others wait for.
		done = c.beginFetch(c.ctx) //nolint:contextcheck // deliberately not the request's: see above
	}
	c.mu.Unlock()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// beginFetch starts a fetch in its own goroutine, to run until ctx ends (the
// verifier's lifetime) or FetchTimeout. c.mu is held.
func (c *jwksCache) beginFetch(ctx context.Context) chan struct{} {
	done := make(chan struct{})
	c.inflight = done
	c.wg.Add(1)
	go c.fetchAndStore(ctx, done)
	return done
}

// fetchAndStore runs one fetch and stores its outcome, then closes done.
func (c *jwksCache) fetchAndStore(ctx context.Context, done chan struct{}) {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(ctx, c.opts.FetchTimeout)
	defer cancel()
	set, period, err := c.fetch(ctx)

	c.mu.Lock()
	now := c.now()
	if err == nil {
		c.set, c.fetched, c.next = set, now, now.Add(period)
		c.failStreak = 0
		c.lastFailed = false
		c.successes++
	} else if c.ctx.Err() == nil { // else the verifier is closing: not the provider's failure
		c.failStreak++
		period = min(jwksFirstRetry<<min(c.failStreak-1, 16), c.opts.MinRefresh)
		c.next = now.Add(period)
		c.lastFailed = true
		c.failures++
	}
	// The refresh loop may be asleep towards the time it set before this fetch.
	select {
	case c.rescheduled <- struct{}{}:
	default:
	}
	failures, hadKeys, lastSuccess := c.failures, c.set != nil, c.fetched
	c.inflight = nil
	c.mu.Unlock()
	// Those waiting are released once the outcome is logged, too.
	defer close(done)

	switch {
	case err == nil:
		c.log.Debug().Int("keys", len(set.all)).Dur("next_in", period).Msg("jwks refreshed")
	case c.ctx.Err() == nil:
		// The error names the URL and what was wrong with the response, never its
		// content: no key material, and no token, reaches the log.
		ev := c.log.Warn().Err(err).Dur("retry_in", period).Uint64("failures", failures).Bool("has_keys", hadKeys)
		if hadKeys {
			ev = ev.Time("last_success", lastSuccess)
		}
		ev.Msg("jwks refresh failed")
	}
}

// fetch discovers the JWK set's URL if needed, then fetches and parses the set. It
// returns the refresh period the response asks for, clamped.
func (c *jwksCache) fetch(ctx context.Context) (*keySet, time.Duration, error) {
	c.mu.Lock()
	keysURL := c.keysURL
	c.mu.Unlock()
	if keysURL == "" {
		u, err := c.discover(ctx)
		if err != nil {
			return nil, 0, err
		}
		c.mu.Lock()
		c.keysURL = u
		c.mu.Unlock()
		keysURL = u
	}
	body, header, err := c.get(ctx, keysURL, MaxJWKSBytes)
	if err != nil {
		return nil, 0, fmt.Errorf("fetch jwks: %w", err)
	}
	set, err := parseKeySet(body)
	if err != nil {
		return nil, 0, err
	}
	period := c.opts.DefaultRefresh
	if d, ok := maxAge(header.Get("Cache-Control")); ok {
		period = min(max(d, c.opts.MinRefresh), c.opts.MaxRefresh)
	}
	return set, period, nil
}

// discover reads the JWK set's URL from the issuer's discovery document. The URL is
// kept for the verifier's life once found.
func (c *jwksCache) discover(ctx context.Context) (string, error) {
	body, _, err := c.get(ctx, c.discoveryURL, MaxDiscoveryBytes)
	if err != nil {
		return "", fmt.Errorf("fetch discovery document: %w", err)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", errors.New("discovery document is not JSON")
	}
	if doc.Issuer != c.issuer {
		return "", fmt.Errorf("discovery document names issuer %.200q, not %q", doc.Issuer, c.issuer)
	}
	if err := checkHTTPURL(doc.JWKSURI); err != nil {
		return "", fmt.Errorf("discovery document jwks_uri: %w", err)
	}
	return doc.JWKSURI, nil
}

// get fetches a URL: status 200 and a body of at most limit bytes.
func (c *jwksCache) get(ctx context.Context, u string, limit int64) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, nil, fmt.Errorf("read body: %w", err)
	}
	if int64(len(body)) > limit {
		return nil, nil, fmt.Errorf("body longer than %d bytes", limit)
	}
	return body, resp.Header, nil
}

// parseKeySet keeps the keys of a JWK set that may verify a token. As RFC 7517 section
// 5 asks, keys of an unknown type or with bad or missing members are ignored; so are
// symmetric ("oct") keys, which must never verify a token of an asymmetric source (the
// set is public), encryption keys, and keys published with their private part. A set
// with no usable key is an error, so that a broken response does not replace the last
// good set.
func parseKeySet(body []byte) (*keySet, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, errors.New("jwks response is not a JSON JWK set")
	}
	set := &keySet{byKID: make(map[string][]verifyKey)}
	for _, raw := range doc.Keys {
		kid, k, ok := parseJWK(raw)
		if !ok {
			continue
		}
		set.all = append(set.all, k)
		if kid != "" {
			set.byKID[kid] = append(set.byKID[kid], k)
		}
	}
	if len(set.all) == 0 {
		return nil, fmt.Errorf("jwks has no usable signing key among %d", len(doc.Keys))
	}
	return set, nil
}

// parseJWK returns a JWK's kid and key if it may verify tokens.
func parseJWK(raw json.RawMessage) (string, verifyKey, bool) {
	var jk jose.JSONWebKey
	if err := jk.UnmarshalJSON(raw); err != nil || !jk.IsPublic() {
		return "", verifyKey{}, false
	}
	// key_ops is not kept by go-jose; RFC 7517 section 4.3.
	var ops struct {
		KeyOps []string `json:"key_ops"`
	}
	if err := json.Unmarshal(raw, &ops); err != nil {
		return "", verifyKey{}, false
	}
	if (jk.Use != "" && jk.Use != "sig") || (ops.KeyOps != nil && !slices.Contains(ops.KeyOps, "verify")) {
		return "", verifyKey{}, false
	}
	algs := jwkAlgorithms(jk.Key)
	if jk.Algorithm != "" {
		if !slices.Contains(algs, jk.Algorithm) {
			return "", verifyKey{}, false
		}
		algs = []string{jk.Algorithm}
	}
	if len(algs) == 0 {
		return "", verifyKey{}, false
	}
	return jk.KeyID, verifyKey{key: jk.Key, algs: algs}, true
}

// jwkAlgorithms are the algorithms a JWK set key may verify, decided by the key alone:
// RS*/PS* for RSA of at least MinRSABits, ES256 for P-256, ES384 for P-384, EdDSA for
// Ed25519. Any other key verifies nothing.
func jwkAlgorithms(k any) []string {
	switch k := k.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() >= MinRSABits {
			return rsaAlgorithms
		}
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return []string{"ES256"}
		case elliptic.P384():
			return []string{"ES384"}
		}
	case ed25519.PublicKey:
		return ed25519Algorithms
	}
	return nil
}

// maxAge reads the max-age of a Cache-Control header; no-store and no-cache count as
// max-age 0 (the clamp makes that MinRefresh). ok is false when there is none.
func maxAge(h string) (d time.Duration, ok bool) {
	for _, dir := range strings.Split(h, ",") {
		name, val, _ := strings.Cut(strings.TrimSpace(dir), "=")
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "no-store", "no-cache":
			return 0, true
		case "max-age":
			n, err := strconv.ParseUint(strings.Trim(strings.TrimSpace(val), `"`), 10, 64)
			if errors.Is(err, strconv.ErrRange) {
				n, err = math.MaxUint32, nil // "a very long time": the clamp makes it MaxRefresh
			}
			if err == nil && !ok {
				d, ok = time.Duration(min(n, math.MaxUint32))*time.Second, true
			}
		}
	}
	return d, ok
}

// confirmedAbsent reports whether the last fetch succeeded: a kid missing from the set
// is then really not the provider's, not a key the replica could not learn of.
func (c *jwksCache) confirmedAbsent() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.set != nil && !c.lastFailed
}

// usable returns the set, or nil before the first success and once it is older than
// MaxStale.
func (c *jwksCache) usable() *keySet {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set == nil || c.now().Sub(c.fetched) > c.opts.MaxStale {
		return nil
	}
	return c.set
}

// key finds the key for a token. A token with a kid is verified by the keys with that
// kid whose algorithms include the token's; an unknown kid waits for the fetch in
// flight or triggers one per UnknownKIDInterval, and the token is refused if a set
// fetched just now lacks the kid. A token without a kid is verified only when the set
// holds exactly one usable key: with several, picking one would be guessing (and
// trying all would let a token cost one signature check per key), and providers that
// rotate keys name them.
//
// When the keys cannot be confirmed — no set fetched yet, the set older than MaxStale,
// or the kid unknown while the last fetch failed — the answer is
// ErrIdentityUnavailable, never a refusal of the token.
func (c *jwksCache) key(ctx context.Context, t *jwt.Token) (any, error) {
	alg := t.Method.Alg()
	kidv, hasKID := t.Header["kid"]
	kid, _ := kidv.(string)
	if hasKID && kid == "" {
		return nil, errNoKey
	}
	set := c.usable()
	if set == nil || (hasKID && len(set.byKID[kid]) == 0) {
		c.refreshForUnknownKID(ctx)
		if set = c.usable(); set == nil {
			return nil, ErrIdentityUnavailable
		}
		if hasKID && len(set.byKID[kid]) == 0 {
			if !c.confirmedAbsent() {
				return nil, ErrIdentityUnavailable
			}
			return nil, errNoKey
		}
	}
	if !hasKID {
		if len(set.all) != 1 {
			return nil, errNoKey
		}
		return pick(set.all, alg)
	}
	return pick(set.byKID[kid], alg)
}

// pick returns the keys that verify alg.
func pick(keys []verifyKey, alg string) (any, error) {
	var ks jwt.VerificationKeySet
	for _, k := range keys {
		if slices.Contains(k.algs, alg) {
			ks.Keys = append(ks.Keys, k.key)
		}
	}
	switch len(ks.Keys) {
	case 0:
		return nil, errNoKey
	case 1:
		return ks.Keys[0], nil
	}
	return ks, nil
}

func (c *jwksCache) status() JWKSStatus {
	set := c.usable()
	c.mu.Lock()
	defer c.mu.Unlock()
	s := JWKSStatus{URL: c.name, LastSuccess: c.fetched, Successes: c.successes, Failures: c.failures}
	if c.keysURL != "" {
		s.KeysURL = redact(c.keysURL)
	}
	if set != nil {
		s.Keys = len(set.all)
	}
	return s
}
