package auth

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// Admin keys open the admin API (its own listener): they change the directory and the
// organisation keys. They are minted by the operator CLI (`agentfy adminkey create`),
// shown once, stored only as hashes like every other secret, and revocable. No other
// credential is accepted in their place, and an admin key is accepted nowhere else.

const prefixAdminKey = "afa"

// MaxAdminKeyName bounds an admin key's label.
const MaxAdminKeyName = 64

// AdminKey is a verified admin key. Name is the operator's label for it ("platform
// sync", "alice's laptop"); the audit log names keys by ID.
type AdminKey struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// CreateAdminKey mints an admin key labelled name. The token is shown once.
func (s *Store) CreateAdminKey(ctx context.Context, name string) (string, AdminKey, error) {
	if name == "" || len(name) > MaxAdminKeyName || strings.ContainsFunc(name, unicode.IsControl) {
		return "", AdminKey{}, fmt.Errorf("auth: an admin key needs a name of 1 to %d printable bytes", MaxAdminKeyName)
	}
	token, sec, err := newSecret(prefixAdminKey)
	if err != nil {
		return "", AdminKey{}, fmt.Errorf("auth: admin key: %w", err)
	}
	created := s.now().UTC().Truncate(time.Second)
	err = s.rdb.HSet(ctx, s.keys.AdminKey(sec.id), "name", name, "hash", sec.hash(), "created", created.Format(time.RFC3339)).Err()
	if err != nil {
		return "", AdminKey{}, fmt.Errorf("auth: store admin key: %w", err)
	}
	return token, AdminKey{ID: sec.id, Name: name, CreatedAt: created}, nil
}

// VerifyAdminKey returns the admin key a token stands for, ErrUnauthenticated for
// anything that is not a current admin key, or a wrapped Redis error.
func (s *Store) VerifyAdminKey(ctx context.Context, token string) (AdminKey, error) {
	sec, ok := parseSecret(token, prefixAdminKey)
	if !ok {
		return AdminKey{}, ErrUnauthenticated
	}
	m, err := s.rdb.HGetAll(ctx, s.keys.AdminKey(sec.id)).Result()
	if err != nil {
		return AdminKey{}, fmt.Errorf("auth: admin key: %w", err)
	}
	if len(m) == 0 || !sec.matches(m["hash"]) {
		return AdminKey{}, ErrUnauthenticated
	}
	created, _ := time.Parse(time.RFC3339, m["created"])
	return AdminKey{ID: sec.id, Name: m["name"], CreatedAt: created}, nil
}

// RevokeAdminKey deletes an admin key by id; its next request is refused. It reports
// whether a key was deleted.
func (s *Store) RevokeAdminKey(ctx context.Context, id string) (bool, error) {
	if len(id) != 16 || !isLowerHex(id) {
		return false, nil
	}
	n, err := s.rdb.Del(ctx, s.keys.AdminKey(id)).Result()
	if err != nil {
		return false, fmt.Errorf("auth: revoke admin key: %w", err)
	}
	return n == 1, nil
}

// IsAdminKeyToken tells whether a bearer token has the shape of an admin key.
func IsAdminKeyToken(token string) bool { _, ok := parseSecret(token, prefixAdminKey); return ok }

// ValidKeyID reports whether id has the shape of a key's id (16 lowercase hex digits).
func ValidKeyID(id string) bool { return len(id) == 16 && isLowerHex(id) }
