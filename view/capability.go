// Package view is the browser-view feature: the one-time capability a broker redeems,
// the per-agent rate gate, and (with the envelope subpackage) what travels between the
// requesting replica and the broker.
package view

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/view/envelope"
)

// CapabilityTTL is how long a view capability can be redeemed.
const CapabilityTTL = 10 * time.Second

// ErrCapabilityNotFound is the one answer for an unknown, expired, already consumed or
// another session's capability, so a caller learns nothing about which.
var ErrCapabilityNotFound = errors.New("view: capability not found")

// Capabilities stores {sessionId, publicKey} under a request id, and redeems it once.
// Nothing else of a view is ever written to Redis: not the private key, not a frame.
type Capabilities struct {
	rdb  redis.UniversalClient
	keys bus.Keys
	ttl  time.Duration
	acks Acks
}

// WithAcks makes each consumption wait for acks (see Acks) and returns c.
func (c *Capabilities) WithAcks(acks Acks) *Capabilities {
	c.acks = acks
	return c
}

// NewCapabilities returns the store for one deployment. ttl 0 means CapabilityTTL (tests
// shorten it to watch Redis's own expiry).
func NewCapabilities(rdb redis.UniversalClient, deployment string, ttl time.Duration) *Capabilities {
	if ttl == 0 {
		ttl = CapabilityTTL
	}
	return &Capabilities{rdb: rdb, keys: bus.KeysFor(deployment), ttl: ttl}
}

type capability struct {
	SessionID string `json:"sessionId"`
	PublicKey string `json:"publicKey"`
}

// The key is tagged by request id: every operation on it is a single key.
func (c *Capabilities) key(requestID string) string { return c.keys.Capability(requestID) }

// Put stores a capability for ttl. It fails if the request id exists already (a 256-bit
// random id never collides; a collision means a bug).
func (c *Capabilities) Put(ctx context.Context, requestID, sessionID, publicKeyHex string) error {
	if !envelope.ValidRequestID(requestID) {
		return errors.New("view: bad request id")
	}
	b, err := json.Marshal(capability{SessionID: sessionID, PublicKey: publicKeyHex})
	if err != nil {
		return fmt.Errorf("put capability: %w", err)
	}
	ok, err := c.rdb.SetNX(ctx, c.key(requestID), b, c.ttl).Result()
	if err != nil {
		return fmt.Errorf("put capability: %w", err)
	}
	if !ok {
		return errors.New("put capability: request id exists")
	}
	return nil
}

// Pending reports whether requestID names a capability of sessionID that is still to be
// redeemed. It consumes nothing. The owner replica asks it before relaying a view
// request, so that a request id nobody stored (a flood of random ones) or one already
// redeemed never reaches the worker or the consume route.
func (c *Capabilities) Pending(ctx context.Context, requestID, sessionID string) (bool, error) {
	if !envelope.ValidRequestID(requestID) || sessionID == "" {
		return false, nil
	}
	b, err := c.rdb.Get(ctx, c.key(requestID)).Bytes()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check capability: %w", err)
	}
	var got capability
	if err := json.Unmarshal(b, &got); err != nil {
		return false, nil
	}
	return got.SessionID == sessionID, nil
}

// consumeScript deletes the capability only when its session matches the caller's, so
// another session's attempt leaves it usable.
var consumeScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return false end
local ok, c = pcall(cjson.decode, v)
if not ok or type(c) ~= 'table' or c.sessionId ~= ARGV[1] then return false end
redis.call('DEL', KEYS[1])
return c.publicKey`)

// Consume redeems a capability for sessionID in one atomic script and returns the
// destination public key, or ErrCapabilityNotFound, or a wrapped Redis error.
func (c *Capabilities) Consume(ctx context.Context, requestID, sessionID string) (string, error) {
	if !envelope.ValidRequestID(requestID) || sessionID == "" {
		return "", ErrCapabilityNotFound
	}
	// Durable, so that a failover cannot bring a consumed capability back.
	pk, err := runScript(ctx, c.rdb, c.acks, consumeScript, []string{c.key(requestID)}, sessionID).Text()
	if errors.Is(err, redis.Nil) {
		return "", ErrCapabilityNotFound
	}
	if err != nil {
		return "", fmt.Errorf("consume capability: %w", err)
	}
	return pk, nil
}

// Delete removes a capability that was not consumed (the requester gave up).
func (c *Capabilities) Delete(ctx context.Context, requestID string) error {
	if err := c.rdb.Del(ctx, c.key(requestID)).Err(); err != nil {
		return fmt.Errorf("delete capability: %w", err)
	}
	return nil
}
