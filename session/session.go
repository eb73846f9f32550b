// Package session keeps worker sessions in Redis: their lifecycle (started by an
// operator, running while tools are used, idle when quiet, stopped by command, by the
// idle timeout, or by the worker's own end-of-session close — never by a lost socket), the worker's hello, the replica that
// holds the worker's socket, and the activity log of tool calls. Only tool calls move a
// session's clock; views never do.
package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/keyspace"
	"github.com/agentfy/agentfy/wire"
)

// Errors callers branch on.
var (
	// ErrNotFound: no session with that id.
	ErrNotFound = errors.New("session: not found")
	// ErrNoSession: the agent has no running or idle session.
	ErrNoSession = errors.New("session: no live session")
)

// Status is a session's state as viewers see it.
type Status string

// The statuses.
const (
	Running Status = "running" // a tool call within the idle window
	Idle    Status = "idle"    // no recent tool call, not yet timed out
	Stopped Status = "stopped"
)

// ActivityLogMax bounds the activity log of one session.
const ActivityLogMax = 1000

// Policy decides when a quiet session is idle and when it stops.
type Policy struct {
	IdleAfter time.Duration // no tool call for this long: idle
	StopAfter time.Duration // no tool call for this long: stopped
}

// DefaultPolicy is used when a zero Policy is given.
var DefaultPolicy = Policy{IdleAfter: 2 * time.Minute, StopAfter: 30 * time.Minute}

// Hello is what a worker states when its tool channel opens.
type Hello struct {
	ImageTag          string   `json:"imageTag"`
	BootstrapRevision int      `json:"bootstrapRevision"`
	Features          []string `json:"capabilities"`
}

// Session is one worker session.
type Session struct {
	ID           string
	AgentID      string
	Stopped      bool
	StopReason   string
	StartedAt    time.Time
	LastToolAt   time.Time
	StoppedAt    time.Time
	Owner        string // replica holding the worker's socket; "" when none
	OwnerKey     string // the owner's public key (hex) that tool calls are sealed to
	Hello        Hello
	WorkerPassID string
	BrokerPassID string
}

// StatusAt derives the status at now under p.
func (s Session) StatusAt(now time.Time, p Policy) Status {
	quiet := now.Sub(s.LastToolAt)
	switch {
	case s.Stopped || quiet >= p.StopAfter:
		return Stopped
	case quiet >= p.IdleAfter:
		return Idle
	default:
		return Running
	}
}

// HasFeature reports whether the worker's hello listed c.
func (s Session) HasFeature(c string) bool { return slices.Contains(s.Hello.Features, c) }

// Passes are a new session's credentials, shown once.
type Passes struct {
	Worker string `json:"workerPass"`
	Broker string `json:"brokerPass"`
}

// Store keeps sessions. Session keys are hash-tagged by session id (the record and its
// activity log share a slot); the agent's pointer to its current session is tagged by
// agent id.
type Store struct {
	rdb    redis.UniversalClient
	creds  *auth.Store
	keys   keyspace.Keys
	policy Policy
	now    func() time.Time
}

// NewStore returns a Store. A zero policy means DefaultPolicy; nil now means time.Now.
func NewStore(rdb redis.UniversalClient, creds *auth.Store, deployment string, policy Policy, now func() time.Time) *Store {
	if policy == (Policy{}) {
		policy = DefaultPolicy
	}
	if now == nil {
		now = time.Now
	}
	return &Store{rdb: rdb, creds: creds, keys: keyspace.For(deployment), policy: policy, now: now}
}

// Policy is the store's idle policy.
func (s *Store) Policy() Policy { return s.policy }

func (s *Store) sessionKey(id string) string    { return s.keys.Session(id) }
func (s *Store) activityKey(id string) string   { return s.keys.SessionActivity(id) }
func (s *Store) currentKey(agent string) string { return s.keys.CurrentSession(agent) }

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func parseMS(v string) time.Time {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// Start begins a new session for agentID (stopping a previous live one) and mints its
// worker and broker passes. The view route never calls this.
func (s *Store) Start(ctx context.Context, agentID string) (Session, Passes, error) {
	if prev, err := s.Current(ctx, agentID); err == nil {
		if _, err := s.Stop(ctx, prev.ID, "replaced"); err != nil {
			return Session{}, Passes{}, err
		}
	} else if !errors.Is(err, ErrNoSession) {
		return Session{}, Passes{}, err
	}
	idb := make([]byte, 16)
	if _, err := rand.Read(idb); err != nil {
		return Session{}, Passes{}, fmt.Errorf("session: id: %w", err)
	}
	id := hex.EncodeToString(idb)
	workerTok, wp, err := s.creds.IssuePass(ctx, auth.RoleWorker, id, agentID)
	if err != nil {
		return Session{}, Passes{}, fmt.Errorf("session: start: %w", err)
	}
	brokerTok, bp, err := s.creds.IssuePass(ctx, auth.RoleBroker, id, agentID)
	if err != nil {
		_ = s.creds.RevokePasses(ctx, wp.ID)
		return Session{}, Passes{}, fmt.Errorf("session: start: %w", err)
	}
	now := s.now()
	sess := Session{ID: id, AgentID: agentID, StartedAt: now, LastToolAt: now, WorkerPassID: wp.ID, BrokerPassID: bp.ID}
	// The record first, then the agent's pointer: a reader that sees the pointer always
	// finds the record.
	err = s.rdb.HSet(ctx, s.sessionKey(id),
		"agent", agentID, "started", ms(now), "lastTool", ms(now),
		"workerPass", wp.ID, "brokerPass", bp.ID).Err()
	// The pointer is swapped in one step that says whom it displaced: a Start that ran
	// beside this one may have put its own session there since this one stopped the
	// previous. Whatever the pointer named is stopped here, so that a session stops being
	// the agent's current one only by being stopped (the view's re-check reads the
	// session's record alone, StillCurrent).
	var displaced string
	if err == nil {
		displaced, err = s.rdb.SetArgs(ctx, s.currentKey(agentID), id, redis.SetArgs{Get: true}).Result()
		if errors.Is(err, redis.Nil) {
			displaced, err = "", nil
		}
	}
	if err != nil {
		_ = s.creds.RevokePasses(ctx, wp.ID, bp.ID)
		return Session{}, Passes{}, fmt.Errorf("session: start: %w", err)
	}
	if displaced != "" && displaced != id {
		if _, err := s.Stop(ctx, displaced, "replaced"); err != nil && !errors.Is(err, ErrNotFound) {
			return Session{}, Passes{}, fmt.Errorf("session: start: stop the displaced session: %w", err)
		}
	}
	return sess, Passes{Worker: workerTok, Broker: brokerTok}, nil
}

// Get returns a session by id, ErrNotFound, or a wrapped Redis error.
func (s *Store) Get(ctx context.Context, id string) (Session, error) {
	record, err := s.rdb.HGetAll(ctx, s.sessionKey(id)).Result()
	if err != nil {
		return Session{}, fmt.Errorf("session: get: %w", err)
	}
	return parse(id, record)
}

// Liveness reads what Status needs of each session — its last tool call and whether
// and when it stopped — in one pipelined round trip (per node of a Cluster), for a
// replica checking every session it holds each second: one round trip each would cost
// a replica holding thousands of them most of a second, and a whole record each (its
// hello, its passes' ids) is forty times the bytes to send, parse and collect (the
// capacity bench, BENCHMARKS.md §7). It reads the two fields with HGET, which the
// replica's Redis user may make (deploy.RedisACL). A session whose record is gone is
// absent from the map; the error is the round trip's.
func (s *Store) Liveness(ctx context.Context, ids []string) (map[string]Session, error) {
	cmds := make([]*redis.SliceCmd, len(ids))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HMGet(ctx, s.sessionKey(id), "lastTool", "stopped")
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("session: liveness: %w", err)
	}
	out := make(map[string]Session, len(ids))
	for i, id := range ids {
		v := cmds[i].Val()
		last, _ := v[0].(string)
		if last == "" {
			continue // no record: every session has its lastTool from the start
		}
		stop, _ := v[1].(string)
		out[id] = Session{ID: id, Stopped: stop != "", LastToolAt: parseMS(last), StoppedAt: parseMS(stop)}
	}
	return out, nil
}

// parse reads session id's record from its HGETALL: ErrNotFound when there is none.
func parse(id string, m map[string]string) (Session, error) {
	if len(m) == 0 {
		return Session{}, ErrNotFound
	}
	sess := Session{
		ID: id, AgentID: m["agent"], Stopped: m["stopped"] != "", StopReason: m["stopReason"],
		StartedAt: parseMS(m["started"]), LastToolAt: parseMS(m["lastTool"]), StoppedAt: parseMS(m["stopped"]),
		Owner: m["owner"], OwnerKey: m["ownerKey"], WorkerPassID: m["workerPass"], BrokerPassID: m["brokerPass"],
	}
	if h := m["hello"]; h != "" {
		// Written by a replica (json.Marshal of Hello), read as every JSON of another
		// process is: a member twice, in another case or unknown is an error.
		if err := wire.DecodeStrict([]byte(h), &sess.Hello); err != nil {
			return Session{}, fmt.Errorf("session: hello: %w", err)
		}
	}
	return sess, nil
}

// CurrentID returns the session id that agent's pointer to its current session holds
// (keyspace.Keys.CurrentSession), given as GET reads it, "" when there is none: the id,
// or ErrNoSession when the agent has none. It reads nothing itself; Current reads the
// session the pointer names, and a view's first check reads the pointer beside its
// access reads.
func CurrentID(pointer string) (string, error) {
	if pointer == "" {
		return "", ErrNoSession
	}
	return pointer, nil
}

// StillCurrent is the view's re-check of a session whose agent and id are known, given
// session id's record as HGETALL reads that hash (keyspace.Keys.Session; empty when
// there is none): it returns what Current would, the session while it is agentID's,
// running or idle, and ErrNoSession once it is not. It reads nothing itself. The
// agent's pointer is not needed: a session stops being the agent's current one only by
// being stopped (Stop; Start stops whatever session its new pointer displaced), which
// its record says.
func (s *Store) StillCurrent(agentID, id string, record map[string]string) (Session, error) {
	sess, err := s.live(parse(id, record))
	if err == nil && sess.AgentID != agentID {
		return Session{}, ErrNoSession
	}
	return sess, err
}

// live is Current for a session read by id: ErrNoSession for one that is gone or
// stopped (the idle timeout counts before the reaper has recorded it).
func (s *Store) live(sess Session, err error) (Session, error) {
	if errors.Is(err, ErrNotFound) {
		return Session{}, ErrNoSession
	}
	if err != nil {
		return Session{}, err
	}
	if sess.StatusAt(s.now(), s.policy) == Stopped {
		return Session{}, ErrNoSession
	}
	return sess, nil
}

// Live returns session id as Current would once its id is known: the session, or
// ErrNoSession when it is gone or stopped.
func (s *Store) Live(ctx context.Context, id string) (Session, error) {
	return s.live(s.Get(ctx, id))
}

// Current returns the agent's running or idle session, ErrNoSession, or a wrapped Redis
// error. A session past the idle timeout counts as stopped even before the reaper has
// recorded it.
func (s *Store) Current(ctx context.Context, agentID string) (Session, error) {
	pointer, err := s.rdb.Get(ctx, s.currentKey(agentID)).Result()
	if errors.Is(err, redis.Nil) {
		pointer, err = "", nil
	}
	if err != nil {
		return Session{}, fmt.Errorf("session: current: %w", err)
	}
	id, err := CurrentID(pointer)
	if err != nil {
		return Session{}, err
	}
	return s.Live(ctx, id)
}

// Status returns a session's status now.
func (s *Store) Status(sess Session) Status { return sess.StatusAt(s.now(), s.policy) }

// Stop ends a session: it is marked stopped, its passes are revoked and the agent's
// pointer cleared (if it still points to it). Stopping a stopped session is a no-op that
// returns it.
func (s *Store) Stop(ctx context.Context, id, reason string) (Session, error) {
	sess, err := s.Get(ctx, id)
	if err != nil {
		return Session{}, err
	}
	if sess.Stopped {
		return sess, nil
	}
	now := s.now()
	if err := s.rdb.HSet(ctx, s.sessionKey(id), "stopped", ms(now), "stopReason", reason).Err(); err != nil {
		return Session{}, fmt.Errorf("session: stop: %w", err)
	}
	if err := s.creds.RevokePasses(ctx, sess.WorkerPassID, sess.BrokerPassID); err != nil {
		return Session{}, fmt.Errorf("session: stop: %w", err)
	}
	// Clear the pointer only if it still names this session.
	if err := delIfEqual.Run(ctx, s.rdb, []string{s.currentKey(sess.AgentID)}, id).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return Session{}, fmt.Errorf("session: stop: %w", err)
	}
	sess.Stopped, sess.StoppedAt, sess.StopReason = true, now, reason
	return sess, nil
}

var delIfEqual = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// Attach records the worker's hello, the replica now holding its socket, and that
// replica's public key (tool calls to the session are sealed to it).
func (s *Store) Attach(ctx context.Context, id, owner, ownerKey string, hello Hello) error {
	h, err := json.Marshal(hello)
	if err != nil {
		return fmt.Errorf("session: attach: %w", err)
	}
	if err := s.rdb.HSet(ctx, s.sessionKey(id), "owner", owner, "ownerKey", ownerKey, "hello", string(h)).Err(); err != nil {
		return fmt.Errorf("session: attach: %w", err)
	}
	return nil
}

// Detach clears the owner if it is still owner (a worker may already have reconnected
// to another replica).
func (s *Store) Detach(ctx context.Context, id, owner string) error {
	if err := hdelIfEqual.Run(ctx, s.rdb, []string{s.sessionKey(id)}, "owner", owner).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("session: detach: %w", err)
	}
	return nil
}

var hdelIfEqual = redis.NewScript(`
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0`)

// Activity is one entry of the activity log: a tool call, never a view.
type Activity struct {
	At   time.Time `json:"at"`
	Tool string    `json:"tool"`
	OK   bool      `json:"ok"`
}

// RecordTool moves the session's clock and appends to its activity log, atomically (one
// slot). Only tool calls call this.
func (s *Store) RecordTool(ctx context.Context, id string, a Activity) error {
	b, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("session: activity: %w", err)
	}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.sessionKey(id), "lastTool", ms(a.At))
		p.RPush(ctx, s.activityKey(id), b)
		p.LTrim(ctx, s.activityKey(id), -ActivityLogMax, -1)
		return nil
	})
	if err != nil {
		return fmt.Errorf("session: activity: %w", err)
	}
	return nil
}

// ActivityLog returns a session's activity log, oldest first. Each entry is read with
// wire.DecodeStrict: one with a member twice, in another case or unknown is an error.
func (s *Store) ActivityLog(ctx context.Context, id string) ([]Activity, error) {
	raw, err := s.rdb.LRange(ctx, s.activityKey(id), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("session: activity: %w", err)
	}
	out := make([]Activity, 0, len(raw))
	for _, r := range raw {
		var a Activity
		if err := wire.DecodeStrict([]byte(r), &a); err != nil {
			return nil, fmt.Errorf("session: activity: %w", err)
		}
		out = append(out, a)
	}
	return out, nil
}

// Event tells every replica's status feed that a session's status changed.
type Event struct {
	AgentID   string    `json:"agentId"`
	SessionID string    `json:"sessionId"`
	Status    Status    `json:"status"`
	At        time.Time `json:"at"`
}
