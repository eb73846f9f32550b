package auth

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentfy/agentfy/keyspace"
	"github.com/redis/go-redis/v9"
)

// Store keeps organisation keys and session passes in Redis, as hashes only. Every key is
// namespaced by deployment and hash-tagged by the credential id, so each operation stays
// in one slot of a Redis Cluster.
type Store struct {
	rdb  redis.UniversalClient
	keys keyspace.Keys
	now  func() time.Time
}

// NewStore returns a Store for one deployment. now may be nil (time.Now).
func NewStore(rdb redis.UniversalClient, deployment string, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{rdb: rdb, keys: keyspace.For(deployment), now: now}
}

// Token prefixes. They help people and secret scanners recognise a leaked credential;
// the role is never taken from them but from the stored record.
const (
	prefixOrgKey = "afk"
	prefixPass   = "afp"
)

// OrgKey is a verified organisation API key.
type OrgKey struct {
	ID          string
	OrgID       string
	Environment string
	Scopes      []string
	CreatedAt   time.Time
}

// HasScope reports whether the key carries scope.
func (k OrgKey) HasScope(scope string) bool { return slices.Contains(k.Scopes, scope) }

func (s *Store) orgKeyKey(id string) string { return s.keys.OrgKey(id) }
func (s *Store) passKey(id string) string   { return s.keys.Pass(id) }

// MaxScopes bounds the scopes of one organisation key.
const MaxScopes = 16

// scopeRe is what a scope looks like: words of lowercase letters, digits, '_', '.' and
// '-', joined by ':' (worker:logs:read).
var scopeRe = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,31}(:[a-z0-9_.-]{1,32}){0,4}$`)

// ValidScope reports whether scope is well formed.
func ValidScope(scope string) bool { return scopeRe.MatchString(scope) }

// CreateOrgKey mints a key for an organisation and environment. The returned token is
// shown once; only its hash is stored. The record and the organisation's index of keys
// are written in that order: a key is listed only once it verifies.
func (s *Store) CreateOrgKey(ctx context.Context, orgID, environment string, scopes []string) (string, OrgKey, error) {
	if orgID == "" || environment == "" {
		return "", OrgKey{}, errors.New("auth: org key needs an organisation and an environment")
	}
	if len(scopes) > MaxScopes {
		return "", OrgKey{}, fmt.Errorf("auth: an org key has at most %d scopes", MaxScopes)
	}
	for _, sc := range scopes {
		if !ValidScope(sc) {
			return "", OrgKey{}, fmt.Errorf("auth: bad scope %q", sc)
		}
	}
	token, sec, err := newSecret(prefixOrgKey)
	if err != nil {
		return "", OrgKey{}, fmt.Errorf("auth: org key: %w", err)
	}
	created := s.now().UTC().Truncate(time.Second)
	err = s.rdb.HSet(ctx, s.orgKeyKey(sec.id),
		"org", orgID, "env", environment, "scopes", strings.Join(scopes, " "),
		"hash", sec.hash(), "created", created.Format(time.RFC3339)).Err()
	if err != nil {
		return "", OrgKey{}, fmt.Errorf("auth: store org key: %w", err)
	}
	if err := s.rdb.SAdd(ctx, s.keys.OrgKeys(orgID), sec.id).Err(); err != nil {
		return "", OrgKey{}, fmt.Errorf("auth: index org key: %w", err)
	}
	return token, OrgKey{ID: sec.id, OrgID: orgID, Environment: environment, Scopes: scopes, CreatedAt: created}, nil
}

// MaxListedKeys bounds what ListOrgKeys returns.
const MaxListedKeys = 1000

// ListOrgKeys returns an organisation's keys, sorted by id, at most MaxListedKeys:
// their ids, environments, scopes and creation times, never a secret or any part of it.
func (s *Store) ListOrgKeys(ctx context.Context, orgID string) ([]OrgKey, error) {
	ids, err := s.rdb.SMembers(ctx, s.keys.OrgKeys(orgID)).Result()
	if err != nil {
		return nil, fmt.Errorf("auth: list org keys: %w", err)
	}
	slices.Sort(ids)
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, s.orgKeyKey(id))
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("auth: list org keys: %w", err)
	}
	keys := []OrgKey{}
	for i, id := range ids {
		m := cmds[i].Val()
		// The record is the truth: a key revoked (or of another organisation) is not listed.
		if len(m) == 0 || m["org"] != orgID {
			continue
		}
		created, _ := time.Parse(time.RFC3339, m["created"])
		keys = append(keys, OrgKey{ID: id, OrgID: orgID, Environment: m["env"], Scopes: strings.Fields(m["scopes"]), CreatedAt: created})
		if len(keys) == MaxListedKeys {
			break
		}
	}
	return keys, nil
}

// VerifyOrgKey returns the key a token stands for, ErrUnauthenticated for anything that
// is not a current key, or a wrapped Redis error.
func (s *Store) VerifyOrgKey(ctx context.Context, token string) (OrgKey, error) {
	claim, ok := ClaimOrgKey(token)
	if !ok {
		return OrgKey{}, ErrUnauthenticated
	}
	record, err := s.rdb.HGetAll(ctx, s.orgKeyKey(claim.ID())).Result()
	if err != nil {
		return OrgKey{}, fmt.Errorf("auth: org key: %w", err)
	}
	return claim.Verify(record)
}

// OrgKeyClaim is what an organisation key token claims before its record is read: the
// key's id, whose record (keyspace.Keys.OrgKey) must hold the hash of the token's secret.
// A reader that reads the record beside other reads (the view's re-check) verifies it
// with Verify, as VerifyOrgKey does.
type OrgKeyClaim struct{ sec secret }

// ClaimOrgKey reads an organisation key token's claim; ok is false for anything that is
// not shaped as an organisation key (which no record can match).
func ClaimOrgKey(token string) (OrgKeyClaim, bool) {
	sec, ok := parseSecret(token, prefixOrgKey)
	return OrgKeyClaim{sec: sec}, ok
}

// ID is the id of the key the token claims to be.
func (c OrgKeyClaim) ID() string { return c.sec.id }

// Verify returns the key that the claimed key's record holds, given as HGETALL reads
// that hash (empty when there is none), or ErrUnauthenticated when there is none, it
// holds another secret's hash, or the claim is the zero one. It reads nothing itself.
func (c OrgKeyClaim) Verify(record map[string]string) (OrgKey, error) {
	if c.sec.id == "" || len(record) == 0 || !c.sec.matches(record["hash"]) {
		return OrgKey{}, ErrUnauthenticated
	}
	return OrgKey{ID: c.sec.id, OrgID: record["org"], Environment: record["env"], Scopes: strings.Fields(record["scopes"])}, nil
}

// RevokeOrgKey deletes orgID's key id: its next request is refused. A key of another
// organisation is left alone; an unknown key changes nothing. It reports whether a key
// was deleted.
func (s *Store) RevokeOrgKey(ctx context.Context, orgID, id string) (bool, error) {
	// One slot: delete the record only if it belongs to orgID.
	n, err := revokeOrgKeyScript.Run(ctx, s.rdb, []string{s.orgKeyKey(id)}, orgID).Int()
	if err != nil {
		return false, fmt.Errorf("auth: revoke org key: %w", err)
	}
	if err := s.rdb.SRem(ctx, s.keys.OrgKeys(orgID), id).Err(); err != nil {
		return n == 1, fmt.Errorf("auth: revoke org key: index: %w", err)
	}
	return n == 1, nil
}

var revokeOrgKeyScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'org') == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// Role is what a session pass may do.
type Role string

// The two pass roles. A worker pass opens the tool channel; a broker pass only consumes
// view grants. Neither is ever accepted in the other's place.
const (
	RoleWorker Role = "worker"
	RoleBroker Role = "broker"
)

// Pass is a verified session pass.
type Pass struct {
	ID        string
	Role      Role
	SessionID string
	AgentID   string
}

// IssuePass mints a pass for a session. The token is shown once; only its hash is kept.
func (s *Store) IssuePass(ctx context.Context, role Role, sessionID, agentID string) (string, Pass, error) {
	if role != RoleWorker && role != RoleBroker {
		return "", Pass{}, fmt.Errorf("auth: unknown role %q", role)
	}
	token, sec, err := newSecret(prefixPass)
	if err != nil {
		return "", Pass{}, fmt.Errorf("auth: pass: %w", err)
	}
	err = s.rdb.HSet(ctx, s.passKey(sec.id),
		PassFieldRole, string(role), PassFieldSession, sessionID, PassFieldAgent, agentID, PassFieldHash, sec.hash()).Err()
	if err != nil {
		return "", Pass{}, fmt.Errorf("auth: store pass: %w", err)
	}
	return token, Pass{ID: sec.id, Role: role, SessionID: sessionID, AgentID: agentID}, nil
}

// The fields of a pass's record (a Redis hash). The consume route reads them inside the
// script that redeems a view grant (view.Grants.Consume), beside the grant itself.
const (
	PassFieldHash    = "hash"
	PassFieldRole    = "role"
	PassFieldSession = "session"
	PassFieldAgent   = "agent"
)

// PassClaim is what a pass token claims before its record is read: the pass's id and the
// SHA-256 of its secret, which the record must hold (IssuePass stores it).
type PassClaim struct{ ID, Hash string }

// ClaimPass reads a pass token's claim; ok is false for anything that is not shaped as a
// pass (which no record can match).
func ClaimPass(token string) (PassClaim, bool) {
	sec, ok := parseSecret(token, prefixPass)
	if !ok {
		return PassClaim{}, false
	}
	return PassClaim{ID: sec.id, Hash: sec.hash()}, true
}

// VerifyPass returns the pass a token stands for if it has the wanted role. A valid pass
// of the other role gives ErrForbidden; anything else that is not a current pass gives
// ErrUnauthenticated.
func (s *Store) VerifyPass(ctx context.Context, token string, want Role) (Pass, error) {
	sec, ok := parseSecret(token, prefixPass)
	if !ok {
		return Pass{}, ErrUnauthenticated
	}
	m, err := s.rdb.HGetAll(ctx, s.passKey(sec.id)).Result()
	if err != nil {
		return Pass{}, fmt.Errorf("auth: pass: %w", err)
	}
	if len(m) == 0 || !sec.matches(m[PassFieldHash]) {
		return Pass{}, ErrUnauthenticated
	}
	p := Pass{ID: sec.id, Role: Role(m[PassFieldRole]), SessionID: m[PassFieldSession], AgentID: m[PassFieldAgent]}
	if p.Role != want {
		return Pass{}, ErrForbidden
	}
	return p, nil
}

// RevokePasses deletes passes by id (when their session stops).
func (s *Store) RevokePasses(ctx context.Context, ids ...string) error {
	for _, id := range ids {
		if id == "" {
			continue
		}
		if err := s.rdb.Del(ctx, s.passKey(id)).Err(); err != nil {
			return fmt.Errorf("auth: revoke pass: %w", err)
		}
	}
	return nil
}

// IsOrgKeyToken and IsPassToken tell which kind of credential a bearer token claims to be,
// so an edge can answer "wrong kind" (403) rather than "unknown" (401). They check only
// the shape.
func IsOrgKeyToken(token string) bool { _, ok := parseSecret(token, prefixOrgKey); return ok }

// IsPassToken: see IsOrgKeyToken.
func IsPassToken(token string) bool { _, ok := parseSecret(token, prefixPass); return ok }
