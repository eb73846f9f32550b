package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MaxTokenLen bounds a JWT before it is parsed at all.
const MaxTokenLen = 8 << 10 // 8 KiB

// JWTConfig configures human token verification. Exactly one of HS256Secret (development)
// and PublicKey (production: an ECDSA, RSA or Ed25519 key of the identity provider) is set.
type JWTConfig struct {
	Issuer      string
	Audience    string
	HS256Secret []byte
	PublicKey   crypto.PublicKey
	// Leeway tolerates clock skew on exp/nbf/iat.
	Leeway time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Verifier checks human JWTs: signature with the one configured algorithm (never "none",
// never an algorithm the key was not meant for), issuer, audience, expiry, and a
// non-empty subject, the user id.
type Verifier struct {
	key     any
	methods []string
	parser  *jwt.Parser
}

// NewVerifier validates cfg. Issuer and Audience are required; so is a key.
func NewVerifier(cfg JWTConfig) (*Verifier, error) {
	if cfg.Issuer == "" || cfg.Audience == "" {
		return nil, errors.New("auth: jwt issuer and audience are required")
	}
	v := &Verifier{}
	switch k := cfg.PublicKey.(type) {
	case nil:
		if len(cfg.HS256Secret) < 32 {
			return nil, errors.New("auth: jwt needs a public key or an HS256 secret of at least 32 bytes")
		}
		v.key, v.methods = cfg.HS256Secret, []string{"HS256"}
	case *ecdsa.PublicKey:
		v.key, v.methods = k, []string{"ES256", "ES384", "ES512"}
	case *rsa.PublicKey:
		v.key, v.methods = k, []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	case ed25519.PublicKey:
		v.key, v.methods = k, []string{"EdDSA"}
	default:
		return nil, fmt.Errorf("auth: unsupported jwt key type %T", cfg.PublicKey)
	}
	if cfg.PublicKey != nil && len(cfg.HS256Secret) > 0 {
		return nil, errors.New("auth: configure either a jwt public key or an HS256 secret, not both")
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(v.methods),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(cfg.Leeway),
	}
	if cfg.Now != nil {
		opts = append(opts, jwt.WithTimeFunc(cfg.Now))
	}
	v.parser = jwt.NewParser(opts...)
	return v, nil
}

// Verify returns the user id (the "sub" claim) of a valid token, or ErrUnauthenticated.
func (v *Verifier) Verify(token string) (string, error) {
	if token == "" || len(token) > MaxTokenLen {
		return "", ErrUnauthenticated
	}
	var claims jwt.RegisteredClaims
	_, err := v.parser.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return v.key, nil })
	if err != nil || claims.Subject == "" {
		return "", ErrUnauthenticated
	}
	return claims.Subject, nil
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
