// Package auth verifies every credential the system accepts: human JWTs, organisation API
// keys, and the two per-session passes (worker and broker). Secrets are random, shown
// once, stored only as SHA-256 hashes, and compared in constant time.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"strings"
)

// Errors callers branch on. Handlers map them to HTTP statuses in one table.
var (
	// ErrUnauthenticated: no credential, or one that is malformed, unknown, expired,
	// revoked or wrongly signed.
	ErrUnauthenticated = errors.New("auth: unauthenticated")
	// ErrForbidden: a valid credential of the wrong kind or without the needed scope.
	ErrForbidden = errors.New("auth: forbidden")
	// ErrNotFound: the resource does not exist or the credential may not know that it
	// does. Both cases are the same error so that responses give no oracle.
	ErrNotFound = errors.New("auth: not found")
	// ErrIdentityUnavailable: a human token that may well be valid, but whose keys the
	// verifier cannot confirm now because the identity provider does not answer — its
	// key set is older than JWKSOptions.MaxStale, none was fetched yet, or the token
	// names a key the set lacks while the last refresh failed. It is never
	// ErrUnauthenticated: clients sign their user out on that, and an outage of the
	// provider must not sign anyone out. A token wrong on its face (bad signature
	// against a fresh set, an algorithm not allowed, another issuer or audience,
	// expired) is ErrUnauthenticated whatever the provider's state.
	ErrIdentityUnavailable = errors.New("auth: identity provider unavailable")
)

// ScopeWorkerLogsRead lets an organisation key read an agent's worker logs and view.
const ScopeWorkerLogsRead = "worker:logs:read"

// SecretBytes is the size of every random secret: 256 bits.
const SecretBytes = 32

// secret is a credential of the form <prefix>_<id>_<64 hex>. The id finds the record;
// the secret part is checked against its stored hash in constant time.
type secret struct {
	prefix, id, value string
}

func newSecret(prefix string) (token string, s secret, err error) {
	idb := make([]byte, 8)
	vb := make([]byte, SecretBytes)
	if _, err := rand.Read(idb); err != nil {
		return "", secret{}, err
	}
	if _, err := rand.Read(vb); err != nil {
		return "", secret{}, err
	}
	s = secret{prefix: prefix, id: hex.EncodeToString(idb), value: hex.EncodeToString(vb)}
	return s.prefix + "_" + s.id + "_" + s.value, s, nil
}

// parseSecret splits a token with one of the given prefixes. It rejects anything but
// lowercase hex of the exact lengths.
func parseSecret(token string, prefixes ...string) (secret, bool) {
	parts := strings.Split(token, "_")
	if len(parts) != 3 || len(parts[1]) != 16 || len(parts[2]) != 2*SecretBytes {
		return secret{}, false
	}
	ok := false
	for _, p := range prefixes {
		if parts[0] == p {
			ok = true
		}
	}
	if !ok || !isLowerHex(parts[1]) || !isLowerHex(parts[2]) {
		return secret{}, false
	}
	return secret{prefix: parts[0], id: parts[1], value: parts[2]}, true
}

func (s secret) hash() string {
	h := sha256.Sum256([]byte(s.value))
	return hex.EncodeToString(h[:])
}

// matches compares the secret with a stored hash in constant time.
func (s secret) matches(storedHash string) bool {
	got := s.hash()
	return len(storedHash) == len(got) && subtle.ConstantTimeCompare([]byte(got), []byte(storedHash)) == 1
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// BearerToken extracts the token of an "Authorization: Bearer <token>" header value. It
// returns "" for anything else.
func BearerToken(header string) string {
	const p = "Bearer "
	if len(header) <= len(p) || !strings.EqualFold(header[:len(p)], p) {
		return ""
	}
	return strings.TrimSpace(header[len(p):])
}
