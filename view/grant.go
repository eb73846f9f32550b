// Package view is the requesting replica's side of a browser view: the one-time
// grant a broker redeems, with its MAC keys, the per-agent rate gate and
// each caller's pace, the request to the replica that holds the worker's socket, and
// the reply, opened with package envelope (a package of its own, which the broker seals
// with) and validated before any frame leaves.
package view

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/keyspace"
	"github.com/agentfy/agentfy/wire"
)

// A grant is the SPEC's one-time view capability: what a replica writes to Redis for one
// view request so that the session's broker, and it alone, may learn the requester's
// public key once (the glossary is package wire's). The contracts keep the SPEC's word:
// AGENTFY_CAPABILITY_KEY, agentfy_capability_forged_total, the consume route's
// "capability not found" answer, the cap: keys and the two labels below.

// The labels of the grants' cryptography. Each is part of what every replica of a
// deployment must compute alike, so neither ever changes without a new version.
const (
	// grantKeyLabel is the HKDF info that derives the grant key from a secret every
	// replica holds (DeriveGrantKey).
	grantKeyLabel = "agentfy capability key v1"
	// grantMACLabel is the first part of a grant's MAC, before the deployment, request
	// id, session id and public key (sum).
	grantMACLabel = "agentfy capability v1"
)

// GrantTTL is how long a view grant can be redeemed.
const GrantTTL = 10 * time.Second

// ErrGrantNotFound is the one answer for an unknown, expired, already consumed or
// another session's grant, so a caller learns nothing about which.
var ErrGrantNotFound = errors.New("view: grant not found")

// ErrGrantForged is a grant that names the consuming session but whose MAC
// no replica's key made: someone else wrote it to Redis (a Redis writer redirecting a
// frame to a key of its own). The consume route answers it as ErrGrantNotFound
// and logs and counts it. It is consumed all the same: it never serves twice.
var ErrGrantForged = errors.New("view: grant not written by a replica")

// Grants stores {sessionId, publicKey, mac} under a request id, and redeems it
// once. Nothing else of a view is ever written to Redis: not the private key, not a
// frame. The MAC (HMAC-SHA256 under the replicas' grant key, GrantKeys) binds
// the deployment, the request id, the session and the public key: only a replica can
// write a grant the consume route accepts, so a Redis writer who is not one can
// refuse a view but never redirect its frame.
type Grants struct {
	rdb        redis.UniversalClient
	keys       keyspace.Keys
	deployment string
	ttl        time.Duration
	acks       Acks
	mac        GrantKeys
}

// GrantKeys are the replicas' keys of the grants' MAC: the first signs, any
// one verifies (a rotation adds the new key second on every replica, then first, then
// removes the old one). Every replica of a deployment holds the same keys.
type GrantKeys [][]byte

// GrantKeyBytes is the size of a grant key.
const GrantKeyBytes = 32

// ParseGrantKeys reads AGENTFY_CAPABILITY_KEY: one or more comma-separated keys,
// each 32 bytes in unpadded base64url (what `agentfy secrets` writes).
func ParseGrantKeys(list string) (GrantKeys, error) {
	var keys GrantKeys
	for _, k := range strings.Split(list, ",") {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		b, err := base64.RawURLEncoding.Strict().DecodeString(k)
		if err != nil || len(b) != GrantKeyBytes {
			return nil, fmt.Errorf("view: a grant key is %d bytes of unpadded base64url", GrantKeyBytes)
		}
		keys = append(keys, b)
	}
	if len(keys) == 0 {
		return nil, errors.New("view: no grant key")
	}
	return keys, nil
}

// DeriveGrantKey derives the grant key from a secret every replica holds and
// no other role does (the replicas' Redis password), for a deployment that sets no
// key of its own: HKDF-SHA256 with grantKeyLabel.
func DeriveGrantKey(secret string) (GrantKeys, error) {
	if secret == "" {
		return nil, errors.New("view: no secret to derive the grant key from")
	}
	k, err := hkdf.Key(sha256.New, []byte(secret), nil, grantKeyLabel, GrantKeyBytes)
	if err != nil {
		return nil, fmt.Errorf("view: derive grant key: %w", err)
	}
	return GrantKeys{k}, nil
}

// sum is the MAC of a grant under key.
func (c *Grants) sum(key []byte, requestID, sessionID, publicKey string) []byte {
	m := hmac.New(sha256.New, key)
	for _, part := range []string{grantMACLabel, c.deployment, requestID, sessionID, publicKey} {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// genuine reports whether mac is a grant's MAC under one of the replicas' keys.
func (c *Grants) genuine(mac, requestID, sessionID, publicKey string) bool {
	got, err := base64.RawURLEncoding.Strict().DecodeString(mac)
	if err != nil {
		return false
	}
	ok := false
	for _, k := range c.mac {
		ok = hmac.Equal(got, c.sum(k, requestID, sessionID, publicKey)) || ok
	}
	return ok
}

// WithAcks makes each consumption wait for acks (see Acks) and returns c.
func (c *Grants) WithAcks(acks Acks) *Grants {
	c.acks = acks
	return c
}

// NewGrants returns the store for one deployment, whose grants carry a MAC
// under keys (without one, Put and Consume fail: nothing is ever written or accepted
// unsigned). ttl 0 means GrantTTL (tests shorten it to watch Redis's own expiry).
func NewGrants(rdb redis.UniversalClient, deployment string, keys GrantKeys, ttl time.Duration) *Grants {
	if ttl == 0 {
		ttl = GrantTTL
	}
	return &Grants{rdb: rdb, keys: keyspace.For(deployment), deployment: deployment, ttl: ttl, mac: keys}
}

// errNoGrantKey is a store without a key.
var errNoGrantKey = errors.New("view: no grant key")

type grant struct {
	SessionID string `json:"sessionId"`
	PublicKey string `json:"publicKey"`
	MAC       string `json:"mac"`
}

// The key is tagged by request id: every operation on it is a single key.
func (c *Grants) key(requestID string) string { return c.keys.Grant(requestID) }

// Put stores a grant for ttl. It fails if the request id exists already (a 256-bit
// random id never collides; a collision means a bug).
func (c *Grants) Put(ctx context.Context, requestID, sessionID, publicKeyHex string) error {
	if !envelope.ValidRequestID(requestID) {
		return errors.New("view: bad request id")
	}
	if len(c.mac) == 0 {
		return errNoGrantKey
	}
	mac := base64.RawURLEncoding.EncodeToString(c.sum(c.mac[0], requestID, sessionID, publicKeyHex))
	b, err := json.Marshal(grant{SessionID: sessionID, PublicKey: publicKeyHex, MAC: mac})
	if err != nil {
		return fmt.Errorf("put grant: %w", err)
	}
	ok, err := c.rdb.SetNX(ctx, c.key(requestID), b, c.ttl).Result()
	if err != nil {
		return fmt.Errorf("put grant: %w", err)
	}
	if !ok {
		return errors.New("put grant: request id exists")
	}
	return nil
}

// Redeemable reports whether requestID names a grant of sessionID that is still to be
// redeemed. It consumes nothing. The owner replica asks it before relaying a view
// request, so that a request id nobody stored (a flood of random ones) or one already
// redeemed never reaches the worker or the consume route.
func (c *Grants) Redeemable(ctx context.Context, requestID, sessionID string) (bool, error) {
	if !envelope.ValidRequestID(requestID) || sessionID == "" {
		return false, nil
	}
	b, err := c.rdb.Get(ctx, c.key(requestID)).Bytes()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check grant: %w", err)
	}
	// Strict, like any JSON another process wrote: a sessionId twice or in another case
	// would let Lua's cjson (the consume script) and Go read two sessions from it.
	var got grant
	if err := wire.DecodeStrict(b, &got); err != nil {
		return false, nil
	}
	return got.SessionID == sessionID && c.genuine(got.MAC, requestID, sessionID, got.PublicKey), nil
}

// consumeScript deletes the grant only when its session matches the caller's, so
// another session's attempt leaves it usable.
var consumeScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return false end
local ok, c = pcall(cjson.decode, v)
if not ok or type(c) ~= 'table' or c.sessionId ~= ARGV[1] then return false end
redis.call('DEL', KEYS[1])
return v`)

// Consume redeems a grant for sessionID in one atomic script and returns the
// destination public key, or ErrGrantNotFound, or ErrGrantForged, or a
// wrapped Redis error.
func (c *Grants) Consume(ctx context.Context, requestID, sessionID string) (string, error) {
	if !envelope.ValidRequestID(requestID) || sessionID == "" {
		return "", ErrGrantNotFound
	}
	if len(c.mac) == 0 {
		return "", errNoGrantKey
	}
	// Durable, so that a failover cannot bring a consumed grant back.
	v, err := runScript(ctx, c.rdb, c.acks, consumeScript, []string{c.key(requestID)}, sessionID).Text()
	if errors.Is(err, redis.Nil) {
		return "", ErrGrantNotFound
	}
	if err != nil {
		return "", fmt.Errorf("consume grant: %w", err)
	}
	var got grant
	if err := wire.DecodeStrict([]byte(v), &got); err != nil || got.SessionID != sessionID ||
		!c.genuine(got.MAC, requestID, sessionID, got.PublicKey) {
		return "", ErrGrantForged
	}
	return got.PublicKey, nil
}

// Delete removes a grant that was not consumed (the requester gave up).
func (c *Grants) Delete(ctx context.Context, requestID string) error {
	if err := c.rdb.Del(ctx, c.key(requestID)).Err(); err != nil {
		return fmt.Errorf("delete grant: %w", err)
	}
	return nil
}
