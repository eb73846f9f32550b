package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"
)

// MaxTokenLen bounds a JWT before it is parsed at all.
const MaxTokenLen = 8 << 10 // 8 KiB

// DefaultUserClaim is the claim that names the directory's user id unless
// JWTConfig.UserClaim says otherwise.
const DefaultUserClaim = "sub"

// JWTConfig configures one source of human tokens. Exactly one key source is set:
// HS256Secret (development), PublicKey (one fixed key of the identity provider), JWKSURL
// (the provider's key set, which it may rotate) or Discovery (the key set found through
// the provider's OpenID discovery document).
type JWTConfig struct {
	// Issuer is the exact "iss" every token must carry. With Discovery it is also where
	// the discovery document is: Issuer + "/.well-known/openid-configuration".
	Issuer string
	// Audience must be one of the token's "aud" values.
	Audience string
	// HS256Secret verifies development tokens (at least 32 bytes).
	HS256Secret []byte
	// PublicKey is an ECDSA, RSA or Ed25519 key of the identity provider.
	PublicKey crypto.PublicKey
	// JWKSURL is the identity provider's JWK set (http or https): a token is verified
	// with the key its "kid" names there.
	JWKSURL string
	// Discovery finds the JWK set's URL ("jwks_uri") in the OpenID discovery document
	// of Issuer, whose "issuer" must equal Issuer exactly (OpenID Connect Discovery 1.0,
	// section 4.3).
	Discovery bool
	// UserClaim names the claim that holds the directory's user id; empty means
	// DefaultUserClaim. A token whose claim is missing, empty or not a string is refused.
	UserClaim string
	// JWKS tunes the key set cache of JWKSURL and Discovery.
	JWKS JWKSOptions
	// Leeway tolerates clock skew on exp/nbf/iat.
	Leeway time.Duration
	// Now is the clock tokens are checked against; nil means time.Now.
	Now func() time.Time
}

// jwksSource reports whether cfg takes its keys from a JWK set.
func (cfg *JWTConfig) jwksSource() bool { return cfg.JWKSURL != "" || cfg.Discovery }

// Verifier checks human JWTs against one or more sources (JWTConfig): the signature with
// an algorithm the key was meant for (never "none", never HMAC with a public key),
// issuer, audience, expiry, and a non-empty user claim. A token valid under any one
// source passes. It is safe for concurrent use.
type Verifier struct {
	sources []*tokenSource
	caches  []*jwksCache // the sources' key set caches, in configuration order
	cancel  context.CancelFunc
	wg      sync.WaitGroup // the caches' refresh loops and fetches
}

// tokenSource is one JWTConfig made ready to verify.
type tokenSource struct {
	issuer    string
	userClaim string
	parser    *jwt.Parser
	// claims checks a token's claims (issuer, audience, times) without its signature:
	// for a token whose keys cannot be confirmed now, to tell a token wrong on its face
	// (ErrUnauthenticated) from one that may be good (ErrIdentityUnavailable).
	claims *jwt.Validator
	// key returns the key (or jwt.VerificationKeySet) for a parsed, not yet verified
	// token, or an error when no key may verify it.
	key func(ctx context.Context, t *jwt.Token) (any, error)
}

// Algorithm families, by key type.
var (
	rsaAlgorithms     = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	ecdsaAlgorithms   = []string{"ES256", "ES384", "ES512"}
	ed25519Algorithms = []string{"EdDSA"}
	// jwksAlgorithms are all that a JWK set key may verify (see jwkAlgorithms).
	jwksAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"}
)

var (
	errOtherIssuer = errors.New("auth: token of another issuer")
	errNoKey       = errors.New("auth: no key for token")
	errCritical    = errors.New("auth: token names critical header extensions")
)

// NewVerifier validates cfgs (at least one) and starts a background refresh for each
// JWK set source: it fetches the keys at once and keeps them fresh, retrying while the
// provider is down, so the verifier starts whatever state the provider is in (until a
// first successful fetch, that source's tokens are refused). The refreshes stop when ctx
// ends or Close is called. Each source needs Issuer, Audience and exactly one key source.
func NewVerifier(ctx context.Context, log zerolog.Logger, cfgs ...JWTConfig) (*Verifier, error) {
	if len(cfgs) == 0 {
		return nil, errors.New("auth: no jwt configuration")
	}
	v := &Verifier{}
	for i := range cfgs {
		s, c, err := newTokenSource(&cfgs[i], log, &v.wg)
		if err != nil {
			if len(cfgs) > 1 {
				return nil, fmt.Errorf("jwt configuration %d: %w", i+1, err)
			}
			return nil, err
		}
		v.sources = append(v.sources, s)
		if c != nil {
			v.caches = append(v.caches, c)
		}
	}
	ctx, v.cancel = context.WithCancel(ctx)
	for _, c := range v.caches {
		c.start(ctx)
	}
	return v, nil
}

func newTokenSource(cfg *JWTConfig, log zerolog.Logger, wg *sync.WaitGroup) (*tokenSource, *jwksCache, error) {
	if cfg.Issuer == "" || cfg.Audience == "" {
		return nil, nil, errors.New("auth: jwt issuer and audience are required")
	}
	n := 0
	for _, set := range []bool{len(cfg.HS256Secret) > 0, cfg.PublicKey != nil, cfg.JWKSURL != "", cfg.Discovery} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, nil, errors.New("auth: configure exactly one jwt key source: an HS256 secret, a public key, a JWKS URL or discovery")
	}
	s := &tokenSource{issuer: cfg.Issuer, userClaim: cfg.UserClaim}
	if s.userClaim == "" {
		s.userClaim = DefaultUserClaim
	}
	var methods []string
	var cache *jwksCache
	switch k := cfg.PublicKey.(type) {
	case nil:
		if cfg.jwksSource() {
			c, err := newJWKSCache(cfg, log, wg)
			if err != nil {
				return nil, nil, err
			}
			cache, s.key, methods = c, c.key, jwksAlgorithms
			break
		}
		if len(cfg.HS256Secret) < 32 {
			return nil, nil, errors.New("auth: jwt HS256 secret must be at least 32 bytes")
		}
		s.key, methods = fixedKey(cfg.HS256Secret), []string{"HS256"}
	case *ecdsa.PublicKey:
		s.key, methods = fixedKey(k), ecdsaAlgorithms
	case *rsa.PublicKey:
		s.key, methods = fixedKey(k), rsaAlgorithms
	case ed25519.PublicKey:
		s.key, methods = fixedKey(k), ed25519Algorithms
	default:
		return nil, nil, fmt.Errorf("auth: unsupported jwt key type %T", cfg.PublicKey)
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(methods),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.Audience),
		jwt.WithExpirationRequired(),
		// An "iat" in the future beyond the leeway is refused too: the leeway covers
		// clock skew, not tokens minted for later.
		jwt.WithIssuedAt(),
		jwt.WithLeeway(cfg.Leeway),
	}
	if cfg.Now != nil {
		opts = append(opts, jwt.WithTimeFunc(cfg.Now))
	}
	s.parser = jwt.NewParser(opts...)
	s.claims = jwt.NewValidator(opts...)
	return s, cache, nil
}

func nonEmptyString(v any) bool {
	s, _ := v.(string)
	return s != ""
}

func fixedKey(k any) func(context.Context, *jwt.Token) (any, error) {
	return func(context.Context, *jwt.Token) (any, error) { return k, nil }
}

// Verify returns the user id (the configured user claim, "sub" by default) of a token
// valid under any of the verifier's sources. It returns ErrIdentityUnavailable when no
// source accepts the token and one could not confirm its keys because its identity
// provider does not answer (see ErrIdentityUnavailable), and ErrUnauthenticated
// otherwise. ctx bounds the wait for a key set refresh that an unknown "kid" triggers
// (at most JWKSOptions.FetchTimeout).
func (v *Verifier) Verify(ctx context.Context, token string) (string, error) {
	if token == "" || len(token) > MaxTokenLen {
		return "", ErrUnauthenticated
	}
	unavailable := false
	for _, s := range v.sources {
		user, err := s.verify(ctx, token)
		if err == nil {
			return user, nil
		}
		unavailable = unavailable || errors.Is(err, ErrIdentityUnavailable)
	}
	if unavailable {
		return "", ErrIdentityUnavailable
	}
	return "", ErrUnauthenticated
}

// verify returns the token's user, ErrIdentityUnavailable (see Verify), or another
// error.
func (s *tokenSource) verify(ctx context.Context, token string) (string, error) {
	claims := jwt.MapClaims{}
	_, err := s.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		// The claims are parsed but not yet trusted: checking the issuer here only
		// keeps a token meant for another source from making this one look up, or
		// fetch, keys. The parser checks it again after the signature.
		if iss, err := t.Claims.GetIssuer(); err != nil || iss != s.issuer {
			return nil, errOtherIssuer
		}
		// RFC 7515 section 4.1.11: a token whose "crit" names extensions the verifier
		// does not understand must be refused, and this one understands none.
		if _, ok := t.Header["crit"]; ok {
			return nil, errCritical
		}
		k, err := s.key(ctx, t)
		if errors.Is(err, ErrIdentityUnavailable) {
			// The keys cannot be confirmed now. A token that fails on its face fails
			// whatever the provider's state; only one that may be good is unavailable.
			if cerr := s.claims.Validate(t.Claims); cerr != nil {
				return nil, cerr
			}
			if mc, _ := t.Claims.(jwt.MapClaims); mc == nil || !nonEmptyString(mc[s.userClaim]) {
				return nil, ErrUnauthenticated
			}
		}
		return k, err
	})
	if err != nil {
		if errors.Is(err, ErrIdentityUnavailable) {
			return "", ErrIdentityUnavailable
		}
		return "", err
	}
	user, _ := claims[s.userClaim].(string)
	if user == "" {
		return "", ErrUnauthenticated
	}
	return user, nil
}

// Close stops the background key set refreshes and waits for them to end. The verifier
// still verifies with the sources that need no fetch; JWK set sources keep their last
// keys until those are older than MaxStale.
func (v *Verifier) Close() {
	v.cancel()
	for _, c := range v.caches {
		c.close()
	}
	v.wg.Wait()
}

// JWKSStatus reports each JWK set source, in configuration order (none when the
// verifier has no such source).
func (v *Verifier) JWKSStatus() []JWKSStatus {
	out := make([]JWKSStatus, 0, len(v.caches))
	for _, c := range v.caches {
		out = append(out, c.status())
	}
	return out
}

// MintHS256 signs a development token for userID. Production tokens come from the
// identity provider; this exists for the operator CLI and tests.
func MintHS256(secret []byte, issuer, audience, userID string, now time.Time, ttl time.Duration) (string, error) {
	if len(secret) < 32 {
		return "", errors.New("auth: HS256 secret of at least 32 bytes required")
	}
	claims := jwt.RegisteredClaims{
		Issuer:    issuer,
		Audience:  jwt.ClaimStrings{audience},
		Subject:   userID,
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}

// LoadPublicKeyPEM reads a PEM "PUBLIC KEY" (PKIX) file for production verification.
func LoadPublicKeyPEM(path string) (crypto.PublicKey, error) {
	b, err := os.ReadFile(path) //nolint:gosec // operator-configured path
	if err != nil {
		return nil, fmt.Errorf("auth: read jwt public key: %w", err)
	}
	if k, err := jwt.ParseECPublicKeyFromPEM(b); err == nil {
		return k, nil
	}
	if k, err := jwt.ParseRSAPublicKeyFromPEM(b); err == nil {
		return k, nil
	}
	if k, err := jwt.ParseEdPublicKeyFromPEM(b); err == nil {
		return k, nil
	}
	return nil, errors.New("auth: jwt public key is not an EC, RSA or Ed25519 PEM public key")
}
