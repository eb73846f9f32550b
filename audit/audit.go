// Package audit publishes the audit trail of a deployment on NATS: one JSON event per
// view decision on agentfy.<deployment>.db<N>.audit.view.<agentId> (View) and one per
// admin change on agentfy.<deployment>.db<N>.audit.admin.<action> (Admin), which the
// NATS role bus.RoleAudit may read and a platform keeps in a JetStream stream
// (docs/operating.md, "Audit trail"). An event holds ids, the outcome, the reason and
// the trace id: never a token, key, URL, title or frame byte.
//
// Publishing never delays or fails what it records: Emit puts the event in a bounded
// buffer and returns at once, one goroutine drains it onto a NATS connection of the
// publisher's own (so a slow audit path never holds the view traffic's socket), and an
// event that finds the buffer full, or that the connection or the server refuses, is
// dropped, counted (Dropped, the replica's agentfy_audit_dropped_total) and logged at
// most once per DropLogInterval.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/directory"
)

// View is the event of one view decision, published on
// agentfy.<deployment>.db<N>.audit.view.<agentId>. Every field is always present; a
// field the decision did not learn is "" (a 401 knows no viewer id, a refusal before
// the agent's record was read no team, a view without a running session no session).
type View struct {
	// Time is when the decision was made: UTC, milliseconds.
	Time time.Time `json:"time"`
	// ViewerKind is ViewerMember (a human JWT on GET /v1/agents/:id/worker/view) or
	// ViewerPartner (an organisation key on GET /v1/orgs/:orgId/agents/:id/worker/view).
	ViewerKind string `json:"viewerKind"`
	// ViewerID is the member's user id or the organisation key's id (never the key).
	ViewerID string `json:"viewerId"`
	// Agent is the agent's id ("" for an id no record can have).
	Agent string `json:"agent"`
	// Team and Organisation are the agent's, from its record.
	Team         string `json:"team"`
	Organisation string `json:"organisation"`
	// Session is the id of the agent's running or idle session the view asked.
	Session string `json:"session"`
	// Outcome is the view route's outcome, as agentfy_view_requests_total labels it:
	// frame, no_tab, not_live, unauthenticated, forbidden, not_found, rate_limited,
	// unavailable, identity_unavailable (other: no answer of its own, a panic).
	Outcome string `json:"outcome"`
	// Reason is a 503's reason from package wire's table (wire.Labels), else "".
	Reason string `json:"reason"`
	// TraceID is the W3C trace id of the request's span (32 lowercase hex), "" when
	// the request is not traced.
	TraceID string `json:"traceId"`
}

// The viewer kinds.
const (
	ViewerMember  = "member"
	ViewerPartner = "partner"
)

// Admin is the event of one admin change, published on
// agentfy.<deployment>.db<N>.audit.admin.<action>.
type Admin struct {
	// Time is when the change was made: UTC, milliseconds.
	Time time.Time `json:"time"`
	// Source is SourceAdminAPI or SourceOperatorCLI.
	Source string `json:"source"`
	// AdminKey is the id of the admin key that made the change on the admin API (never
	// the key); "" for the operator CLI, which holds the operator's credentials.
	AdminKey string `json:"adminKey"`
	// Action names the change: user.put, team.put, org.put, members.set, member.add,
	// member.remove, agent.put, agent.delete, orgkey.create, orgkey.revoke,
	// adminkey.create, adminkey.revoke, directory.seed, session.start, session.stop.
	Action string `json:"action"`
	// IDs are what the change touched, by kind (agent, team, user, org, key, session,
	// …), the same pairs as the change's log line; never a secret.
	IDs map[string]string `json:"ids"`
	// TraceID: as View's.
	TraceID string `json:"traceId"`
}

// The sources of admin changes.
const (
	SourceAdminAPI    = "admin-api"
	SourceOperatorCLI = "operator-cli"
)

// Limits of a publisher.
const (
	// Buffer is how many events wait for the connection; more are dropped.
	Buffer = 4096
	// MaxEventBytes bounds one event's JSON: a members.set that adds and removes
	// directory.MaxMembers ids of the longest kind fits. A larger one is dropped.
	MaxEventBytes = 2 << 20 // 2 MiB
	// MaxBufferedBytes bounds the JSON waiting in the buffer, whatever the number of
	// events; more is dropped.
	MaxBufferedBytes = 16 << 20 // 16 MiB
	// FlushEvery is how often the drain asks the server to confirm what it sent (a
	// PING), so that a connection that stalls shows as drops rather than a growing
	// socket buffer.
	FlushEvery = 256
	// FlushTimeout bounds each of those confirmations.
	FlushTimeout = 2 * time.Second
	// WriteTimeout bounds each write to the server; a connection that cannot write for
	// that long reconnects, and while it does every event is dropped (no reconnect
	// buffer holds them, to be lost uncounted).
	WriteTimeout = 2 * time.Second
	// DropLogInterval spaces the log lines about drops.
	DropLogInterval = 10 * time.Second
)

// Publisher publishes audit events of one namespace. It is safe for concurrent use;
// the zero value is not usable, a nil *Publisher drops nothing and publishes nothing.
type Publisher struct {
	conn *nats.Conn
	ns   bus.Namespace
	log  zerolog.Logger

	mu      sync.RWMutex  // guards closed; held for reading while an event is queued
	closed  bool          // Close was called: the queue is closed
	queue   chan message  // bounded (Buffer); closed by Close
	drained chan struct{} // closed when the drain goroutine ends

	buffered atomic.Int64 // bytes of the events in queue
	dropped  atomic.Uint64
	lastLog  atomic.Int64 // unix nanoseconds of the last drop log line
}

type message struct {
	subject string
	data    []byte
}

// Connect opens the publisher's own NATS connection with cfg (the role's credentials:
// a replica's, or the operator's for the CLI) and starts its drain.
func Connect(cfg bus.Config, ns bus.Namespace, log zerolog.Logger) (*Publisher, error) {
	p := &Publisher{ns: ns, log: log, queue: make(chan message, Buffer), drained: make(chan struct{})}
	cfg.AsyncError = p.asyncError
	cfg.WriteTimeout, cfg.NoReconnectBuffer = WriteTimeout, true
	if cfg.Name != "" {
		cfg.Name += " audit"
	}
	nc, err := bus.Connect(cfg, log)
	if err != nil {
		return nil, err
	}
	p.conn = nc
	go p.drain()
	return p, nil
}

// asyncError counts a publish the server refused (its permissions) as a drop.
func (p *Publisher) asyncError(err error) bool {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return false
	}
	p.drop("refused")
	return true
}

// View publishes a view decision's event. ctx is the request's (for its trace id).
func (p *Publisher) View(ctx context.Context, e View) {
	if p == nil {
		return
	}
	e.Time = stamp(e.Time)
	e.TraceID = TraceID(ctx)
	if !directory.ValidID(e.Agent) {
		e.Agent = ""
	}
	p.emit(p.ns.AuditView(e.Agent), e)
}

// Admin publishes an admin change's event. ctx is the change's.
func (p *Publisher) Admin(ctx context.Context, e Admin) {
	if p == nil {
		return
	}
	e.Time = stamp(e.Time)
	e.TraceID = TraceID(ctx)
	if e.IDs == nil {
		e.IDs = map[string]string{}
	}
	subject, err := p.ns.AuditAdmin(e.Action)
	if err != nil {
		p.drop("invalid")
		return
	}
	p.emit(subject, e)
}

func (p *Publisher) emit(subject string, e any) {
	b, err := json.Marshal(e)
	if err != nil || len(b) > MaxEventBytes {
		p.drop("invalid")
		return
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		p.drop("closed")
		return
	}
	if p.buffered.Add(int64(len(b))) > MaxBufferedBytes {
		p.buffered.Add(-int64(len(b)))
		p.drop("full")
		return
	}
	select {
	case p.queue <- message{subject, b}:
	default:
		p.buffered.Add(-int64(len(b)))
		p.drop("full")
	}
}

// Dropped is how many events were dropped so far: the buffer was full, the connection
// failed the publish, or the server refused it.
func (p *Publisher) Dropped() uint64 {
	if p == nil {
		return 0
	}
	return p.dropped.Load()
}

// drop counts one dropped event and logs it, at most once per DropLogInterval, with
// the count so far and why: never the event.
func (p *Publisher) drop(why string) {
	n := p.dropped.Add(1)
	now := time.Now().UnixNano()
	last := p.lastLog.Load()
	if now-last < int64(DropLogInterval) || !p.lastLog.CompareAndSwap(last, now) {
		return
	}
	p.log.Warn().Str("why", why).Uint64("dropped", n).Msg("audit events dropped")
}

// drain publishes the queue's events in order until Close, confirming with the server
// every FlushEvery events and whenever the queue runs empty.
func (p *Publisher) drain() {
	defer close(p.drained)
	unflushed := 0
	flush := func() {
		if unflushed == 0 {
			return
		}
		if err := p.conn.FlushTimeout(FlushTimeout); err != nil {
			p.log.Debug().Err(err).Msg("audit flush")
		}
		unflushed = 0
	}
	for {
		var m message
		var ok bool
		select {
		case m, ok = <-p.queue:
		default:
			flush()
			m, ok = <-p.queue
		}
		if !ok {
			flush()
			return
		}
		p.buffered.Add(-int64(len(m.data)))
		if err := p.conn.Publish(m.subject, m.data); err != nil {
			p.drop("publish")
			continue
		}
		if unflushed++; unflushed >= FlushEvery {
			flush()
		}
	}
}

// Close publishes what is buffered, waiting until ctx ends at most, then closes the
// connection; what is left then is dropped (and counted). It returns ctx's error when
// the buffer was not emptied in time. A write in progress may hold it WriteTimeout
// longer. An event emitted after Close is dropped.
func (p *Publisher) Close(ctx context.Context) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.queue)
	}
	p.mu.Unlock()
	select {
	case <-p.drained: // it flushed what it sent
		p.conn.Close()
		return nil
	case <-ctx.Done():
	}
	// Closed, the connection fails the drain's publishes at once: it counts the rest
	// as dropped and ends.
	p.conn.Close()
	<-p.drained
	return ctx.Err()
}

// TraceID is the trace id of ctx's span, "" when it has no valid one.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// stamp is t (or now, when t is zero) in UTC, to the millisecond.
func stamp(t time.Time) time.Time {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UTC().Truncate(time.Millisecond)
}
