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
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/auth"
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
	return macOf(key, grantMACLabel, c.deployment, requestID, sessionID, publicKey)
}

// genuine reports whether mac is a grant's MAC under one of the replicas' keys.
func (c *Grants) genuine(mac, requestID, sessionID, publicKey string) bool {
	return c.signedByAny(mac, func(k []byte) []byte { return c.sum(k, requestID, sessionID, publicKey) })
}

// macOf is HMAC-SHA256 under key over parts, each followed by a zero byte.
func macOf(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	for _, part := range parts {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// signedByAny reports whether mac (unpadded base64url) is sum under one of the replicas'
// keys, compared in constant time against every key.
func (c *Grants) signedByAny(mac string, sum func(key []byte) []byte) bool {
	got, err := base64.RawURLEncoding.Strict().DecodeString(mac)
	if err != nil {
		return false
	}
	ok := false
	for _, k := range c.mac {
		ok = hmac.Equal(got, sum(k)) || ok
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

// A Grant is one view's grant, ready to be written (New): the gate writes it in the
// round trip of its decision (Gate.Decide), or Put alone.
type Grant struct {
	key   string
	value []byte
	ttl   time.Duration
}

// New makes the grant of requestID for the session whose broker pass is brokerPassID,
// sealed to publicKeyHex, with its MAC. Its key is in the broker pass's slot
// (keyspace.Keys.Grant), where the consume route checks the pass and redeems the grant
// in one script (Consume).
func (c *Grants) New(requestID, sessionID, brokerPassID, publicKeyHex string) (Grant, error) {
	if !envelope.ValidRequestID(requestID) {
		return Grant{}, errors.New("view: bad request id")
	}
	if sessionID == "" || brokerPassID == "" {
		return Grant{}, errors.New("view: a grant needs a session and its broker pass")
	}
	if len(c.mac) == 0 {
		return Grant{}, errNoGrantKey
	}
	mac := base64.RawURLEncoding.EncodeToString(c.sum(c.mac[0], requestID, sessionID, publicKeyHex))
	b, err := json.Marshal(grant{SessionID: sessionID, PublicKey: publicKeyHex, MAC: mac})
	if err != nil {
		return Grant{}, fmt.Errorf("put grant: %w", err)
	}
	return Grant{key: c.keys.Grant(brokerPassID, requestID), value: b, ttl: c.ttl}, nil
}

// queue queues the grant's write on p: SET NX with its lifetime. The function, called
// after p ran, says whether it was written (a 256-bit random id never collides; a
// collision means a bug).
func (g Grant) queue(ctx context.Context, p redis.Pipeliner) func() error {
	cmd := p.SetNX(ctx, g.key, g.value, g.ttl)
	return func() error {
		ok, err := cmd.Result()
		if err != nil {
			return fmt.Errorf("put grant: %w", err)
		}
		if !ok {
			return errors.New("put grant: request id exists")
		}
		return nil
	}
}

// Put stores a grant (New) for its lifetime, alone: a view writes it beside the gate's
// decision instead (Gate.Decide).
func (c *Grants) Put(ctx context.Context, requestID, sessionID, brokerPassID, publicKeyHex string) error {
	g, err := c.New(requestID, sessionID, brokerPassID, publicKeyHex)
	if err != nil {
		return err
	}
	p := c.rdb.Pipeline()
	written := g.queue(ctx, p)
	_, _ = p.Exec(ctx)
	return written()
}

// Delete removes a grant that was not consumed (the requester gave up, or the gate
// refused the view it was written for).
func (c *Grants) Delete(ctx context.Context, g Grant) error {
	if err := c.rdb.Del(ctx, g.key).Err(); err != nil {
		return fmt.Errorf("delete grant: %w", err)
	}
	return nil
}

// A view request on NATS carries its request id and, in a header, the requesting
// replica's proof of it (Proof): the time it was made and a MAC under the grant key
// over the deployment, the request id and the session. The owner replica checks it
// (Vouched) before it relays anything to the worker, without a Redis round trip, so a
// request id no replica made (a flood of random ones, or one for another session) never
// reaches the worker or the consume route. A replayed request is stale after
// GrantTTL, and the owner refuses one it has already relayed within it
// (package channel).

// proofLabel is the first part of a request proof's MAC.
const proofLabel = "agentfy view request v1"

// ProofSkew is how far ahead of the owner's clock a proof may be dated (the replicas'
// clocks differ a little).
const ProofSkew = 2 * time.Second

// proofSum is the MAC of a request proof under key.
func (c *Grants) proofSum(key []byte, requestID, sessionID, issued string) []byte {
	return macOf(key, proofLabel, c.deployment, requestID, sessionID, issued)
}

// Proof is the proof of a view request for sessionID made at now: "<unix ms>.<MAC>".
func (c *Grants) Proof(requestID, sessionID string, now time.Time) (string, error) {
	if len(c.mac) == 0 {
		return "", errNoGrantKey
	}
	issued := strconv.FormatInt(now.UnixMilli(), 10)
	return issued + "." + base64.RawURLEncoding.EncodeToString(c.proofSum(c.mac[0], requestID, sessionID, issued)), nil
}

// Vouched reports whether proof is a replica's proof of requestID for sessionID, made
// no longer than GrantTTL before now (and no more than ProofSkew after it).
func (c *Grants) Vouched(requestID, sessionID, proof string, now time.Time) bool {
	if !envelope.ValidRequestID(requestID) || sessionID == "" {
		return false
	}
	issued, mac, ok := strings.Cut(proof, ".")
	if !ok {
		return false
	}
	ms, err := strconv.ParseInt(issued, 10, 64)
	if err != nil || issued != strconv.FormatInt(ms, 10) {
		return false
	}
	if age := now.Sub(time.UnixMilli(ms)); age > c.ttl || age < -ProofSkew {
		return false
	}
	return c.signedByAny(mac, func(k []byte) []byte { return c.proofSum(k, requestID, sessionID, issued) })
}

// consumeScript redeems a grant for the broker pass that presents it, in one step on two
// keys of the pass's slot: the pass (KEYS[1], auth's record) and the grant (KEYS[2]).
// The presented secret's hash (ARGV[1]) is compared with the stored one through a hash
// keyed by a random nonce (ARGV[2]), so the comparison's time tells nothing of the
// stored hash; a pass of another role (ARGV[3] is the one wanted) redeems nothing; the
// grant is deleted only when its session is the pass's, so another session's attempt
// leaves it usable. The reply is {0} (no such pass), {1} (another role), {2, session}
// (no grant of this pass's session) or {3, session, grant}.
var consumeScript = redis.NewScript(`
local p = redis.call('HMGET', KEYS[1], '` + auth.PassFieldHash + `', '` + auth.PassFieldRole + `', '` + auth.PassFieldSession + `')
if not p[1] or redis.sha1hex(ARGV[2] .. p[1]) ~= redis.sha1hex(ARGV[2] .. ARGV[1]) then return {0} end
if p[2] ~= ARGV[3] then return {1} end
local session = p[3] or ''
local v = redis.call('GET', KEYS[2])
if not v then return {2, session} end
local ok, c = pcall(cjson.decode, v)
if not ok or type(c) ~= 'table' or c.sessionId ~= session or session == '' then return {2, session} end
redis.call('DEL', KEYS[2])
return {3, session, v}`)

// Consume redeems a grant with the broker pass that claims it, in one atomic script,
// and returns the destination public key and the pass's session. A pass that is not
// current is auth.ErrUnauthenticated, a pass of another role auth.ErrForbidden; then
// ErrGrantNotFound, ErrGrantForged, or a wrapped Redis error.
func (c *Grants) Consume(ctx context.Context, pass auth.PassClaim, requestID string) (publicKey, sessionID string, err error) {
	if len(c.mac) == 0 {
		return "", "", errNoGrantKey
	}
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return "", "", fmt.Errorf("consume grant: %w", err)
	}
	grantKey := c.keys.Grant(pass.ID, requestID)
	if !envelope.ValidRequestID(requestID) {
		// Still check the pass: a caller without one hears 401, not 404. The script
		// finds no grant under a key no request id makes.
		grantKey = c.keys.Grant(pass.ID, "-")
	}
	// Durable, so that a failover cannot bring a consumed grant back.
	reply, err := runScript(ctx, c.rdb, c.acks, consumeScript, []string{c.keys.Pass(pass.ID), grantKey},
		pass.Hash, hex.EncodeToString(nonce), string(auth.RoleBroker)).Slice()
	if err != nil {
		return "", "", fmt.Errorf("consume grant: %w", err)
	}
	code, _ := reply[0].(int64)
	switch {
	case code == 0:
		return "", "", auth.ErrUnauthenticated
	case code == 1:
		return "", "", auth.ErrForbidden
	case len(reply) < 2:
		return "", "", fmt.Errorf("consume grant: a reply of %d values", len(reply))
	}
	sessionID, _ = reply[1].(string)
	if code != 3 || len(reply) != 3 {
		return "", sessionID, ErrGrantNotFound
	}
	v, _ := reply[2].(string)
	var got grant
	if err := wire.DecodeStrict([]byte(v), &got); err != nil || got.SessionID != sessionID ||
		!c.genuine(got.MAC, requestID, sessionID, got.PublicKey) {
		return "", sessionID, ErrGrantForged
	}
	return got.PublicKey, sessionID, nil
}
