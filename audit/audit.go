// Package audit publishes the audit trail of a deployment: one JSON event per view
// decision on agentfy.<deployment>.db<N>.audit.view.<agentId> (View; ….view._ for a
// decision that read no agent's record) and one per admin change on
// agentfy.<deployment>.db<N>.audit.admin.<source>.<action> (Admin), kept in the
// JetStream stream AGENTFY_AUDIT (Stream) and read with `agentfy audit`
// (docs/operating.md, "Audit trail"). An event holds ids, the outcome, the reason and
// the trace id: never a token, key, URL, title or frame byte.
//
// Every event carries its origin (Origin): the replica, an id of the publishing
// process's start (its boot) and the event's number in that boot's sequence, 1, 2,
// 3…, never reused, which is also its message's Nats-Msg-Id. So the trail shows a gap:
// a number missing from a boot's sequence is an event lost (`agentfy audit verify`).
//
// Durable (the default): a frame is served only once the stream acknowledged its
// event (Frame, within wire.AuditTimeout); every other decision and every admin change
// waits in a bounded buffer for its acknowledgement, retried for RetryFor, with
// identical refusals of one second folded into one event with a count while they
// wait. Best effort (AGENTFY_AUDIT=best-effort, a deployment without JetStream):
// every event, a frame's too, goes through the buffer onto core NATS unacknowledged.
// Whatever is not recorded is counted by cause (Drops), never dropped silently.
package audit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/wire"
)

// Origin says who published an event and where it stands in its publisher's sequence.
// The subject an event was read from, not these fields, says which role published it
// (an admin event's source); Origin lets a reader find what is missing.
type Origin struct {
	// Replica is the publishing replica's id ("cli" for the operator CLI).
	Replica string `json:"replica"`
	// Boot is a random id of the publishing process's start (16 lowercase hex).
	Boot string `json:"boot"`
	// Seq is the event's number in its boot's sequence: 1, 2, 3…, never reused.
	Seq uint64 `json:"seq"`
	// Count is how many decisions the event stands for: 1, or more for identical
	// refusals of one second folded into one under a flood.
	Count int `json:"count"`
}

// MsgID is the event's Nats-Msg-Id, <boot>-<seq>: a stream's duplicate window keeps one
// copy of an event published twice (a retry after a lost acknowledgement).
func (o Origin) MsgID() string { return o.Boot + "-" + strconv.FormatUint(o.Seq, 10) }

// View is the event of one view decision. Every field is always present; a field the
// decision did not learn is "" (a 401 knows no viewer id, a refusal before the agent's
// record was read no team, a view without a running session no session).
type View struct {
	// Time is when the decision was made: UTC, milliseconds.
	Time time.Time `json:"time"`
	// ViewerKind is ViewerMember (a human JWT on GET /v1/agents/:id/worker/view) or
	// ViewerPartner (an organisation key on GET /v1/orgs/:orgId/agents/:id/worker/view).
	ViewerKind string `json:"viewerKind"`
	// ViewerID is the member's user id or the organisation key's id (never the key).
	ViewerID string `json:"viewerId"`
	// Agent is the agent's id ("" for an id no record can have, or for refusals of
	// several ids folded into one event).
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
	Origin
}

// The viewer kinds.
const (
	ViewerMember  = "member"
	ViewerPartner = "partner"
)

// Outcomes the publisher itself names.
const (
	// OutcomeFrame is a view answered with a frame: the one decision that waits for
	// its event's acknowledgement.
	OutcomeFrame = "frame"
	// OutcomeUnavailable with ReasonUnavailable is a frame discarded because its event
	// was not acknowledged in time.
	OutcomeUnavailable = "unavailable"
)

// Admin is the event of one admin change.
type Admin struct {
	// Time is when the change was made: UTC, milliseconds.
	Time time.Time `json:"time"`
	// Source is SourceAdminAPI or SourceOperatorCLI: the publisher's, whatever the
	// caller set, and what its subject says (a reader takes the subject's word).
	Source string `json:"source"`
	// AdminKey is the id of the admin key that made the change on the admin API (never
	// the key); "" for the operator CLI, which holds the operator's credentials.
	AdminKey string `json:"adminKey"`
	// Action names the change: one of package change's Actions (user.put, team.put,
	// org.put, members.set, member.add, member.remove, agent.put, agent.delete,
	// orgkey.create, orgkey.revoke, adminkey.create, adminkey.revoke, directory.seed,
	// session.start, session.stop).
	Action string `json:"action"`
	// IDs are what the change touched, by kind (agent, team, user, org, key, session,
	// …), the same pairs as the change's log line; never a secret.
	IDs map[string]string `json:"ids"`
	// TraceID: as View's.
	TraceID string `json:"traceId"`
	Origin
}

// The sources of admin changes, and their subjects' tokens.
const (
	SourceAdminAPI    = "admin-api"
	SourceOperatorCLI = "operator-cli"
)

// SourceToken is the subject token of source (bus.AuditSourceAPI or AuditSourceCLI),
// "" for an unknown source.
func SourceToken(source string) string {
	switch source {
	case SourceAdminAPI:
		return bus.AuditSourceAPI
	case SourceOperatorCLI:
		return bus.AuditSourceCLI
	}
	return ""
}

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
	// AckTimeout bounds each wait for the stream's acknowledgement of a buffered event.
	AckTimeout = 2 * time.Second
	// RetryFor is how long a buffered event is retried before it is dropped
	// (unacknowledged); meanwhile the events behind it wait, and identical refusals
	// among them fold.
	RetryFor = 30 * time.Second
	// FlushEvery, FlushTimeout: best effort only, how often the drain asks the server
	// to confirm what it sent (a PING), so that a connection that stalls shows as drops
	// rather than a growing socket buffer, and how long it waits.
	FlushEvery   = 256
	FlushTimeout = 2 * time.Second
	// WriteTimeout bounds each write to the server; a connection that cannot write for
	// that long reconnects, and while it does no event is buffered by the client (none
	// is lost uncounted).
	WriteTimeout = 2 * time.Second
	// DropLogInterval spaces the log lines about drops.
	DropLogInterval = 10 * time.Second
	// FoldWindow is how long identical refusals fold into one event: each is held
	// until the window it falls in ends.
	FoldWindow = time.Second
)

// The causes of a dropped event, agentfy_audit_dropped_total's reason label.
const (
	DropFull           = "full"           // the buffer was full
	DropInvalid        = "invalid"        // unencodable, too large, or an unknown action
	DropClosed         = "closed"         // emitted after Close, or left when Close's deadline came
	DropUnacknowledged = "unacknowledged" // the stream did not acknowledge it within RetryFor
	DropRefused        = "refused"        // the server refused the publish (best effort: its permissions)
	DropPublish        = "publish"        // the connection failed the publish (best effort)
)

// DropReasons lists every cause of a drop.
var DropReasons = []string{DropFull, DropInvalid, DropClosed, DropUnacknowledged, DropRefused, DropPublish}

// ErrUnavailable is Frame's error: the stream did not acknowledge the frame's event in
// time, and the frame must not be served (wire reason audit_unavailable).
var ErrUnavailable = errors.New("audit: the audit stream did not acknowledge the event")

// Options configure a publisher.
type Options struct {
	// Replica is the publishing replica's id (Origin.Replica).
	Replica string
	// Source is the admin events' source: SourceAdminAPI (a replica) or
	// SourceOperatorCLI. The NATS server lets each role publish its own only.
	Source string
	// BestEffort publishes on core NATS without acknowledgement (AGENTFY_AUDIT=
	// best-effort): nothing waits, nothing is retried, and the trail cannot show it is
	// complete.
	BestEffort bool
}

// Publisher publishes audit events of one namespace. It is safe for concurrent use;
// the zero value is not usable, a nil *Publisher drops nothing and publishes nothing.
type Publisher struct {
	conn   *nats.Conn
	js     jetstream.JetStream
	ns     bus.Namespace
	opts   Options
	log    zerolog.Logger
	origin Origin // Replica and Boot
	seq    atomic.Uint64

	mu       sync.Mutex
	closed   bool               // Close was called: nothing more is queued
	queue    []*item            // FIFO, at most Buffer
	folds    map[string]*item   // the held or queued refusals that may take more of their kind
	holding  []*item            // refusals held until their window ends (emit), in the order they came
	buffered int                // bytes of the queue's events, at most MaxBufferedBytes
	wake     chan struct{}      // signalled when the queue gains an item or closes
	stop     context.CancelFunc // ends the drain's waits when Close's deadline came
	stopped  context.Context    // the drain's context
	drained  chan struct{}      // closed when the drain goroutine ends
	drops    [6]atomic.Uint64   // by DropReasons' index
	lastLog  atomic.Int64       // unix nanoseconds of the last drop log line
	acked    atomic.Uint64      // events the stream acknowledged (or, best effort, sent)
}

// item is one queued event: the event itself (so a fold can raise its count before it
// is encoded) and its size as first encoded.
type item struct {
	held    bool      // waiting for its window to end before it is queued; guarded by mu
	due     time.Time // when its window ends
	subject string
	view    *View  // or
	admin   *Admin // one of the two
	size    int
	fold    string // the fold key, "" when it does not fold
}

func (it *item) origin() *Origin {
	if it.view != nil {
		return &it.view.Origin
	}
	return &it.admin.Origin
}

func (it *item) encode() ([]byte, error) {
	if it.view != nil {
		return json.Marshal(it.view)
	}
	return json.Marshal(it.admin)
}

// Connect opens the publisher's own NATS connection with cfg (the role's credentials:
// a replica's, or the operator's for the CLI) and starts its drain.
func Connect(cfg bus.Config, ns bus.Namespace, o Options, log zerolog.Logger) (*Publisher, error) {
	if SourceToken(o.Source) == "" {
		return nil, fmt.Errorf("audit: unknown source %q", o.Source)
	}
	boot := make([]byte, 8)
	if _, err := rand.Read(boot); err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	p := &Publisher{
		ns: ns, opts: o, log: log, origin: Origin{Replica: o.Replica, Boot: hex.EncodeToString(boot)},
		folds: map[string]*item{}, wake: make(chan struct{}, 1), stop: stop, stopped: ctx, drained: make(chan struct{}),
	}
	cfg.AsyncError = p.asyncError
	cfg.WriteTimeout, cfg.NoReconnectBuffer = WriteTimeout, true
	if cfg.Name != "" {
		cfg.Name += " audit"
	}
	nc, err := bus.Connect(cfg, log)
	if err != nil {
		stop()
		return nil, err
	}
	p.conn = nc
	if p.js, err = jetstream.New(nc); err != nil {
		stop()
		nc.Close()
		return nil, err
	}
	go p.drain()
	return p, nil
}

// Boot is this publisher's boot id (Origin.Boot).
func (p *Publisher) Boot() string { return p.origin.Boot }

// BestEffort reports whether the publisher sends without acknowledgement.
func (p *Publisher) BestEffort() bool { return p != nil && p.opts.BestEffort }

// asyncError counts a publish the server refused (its permissions) as a drop, when
// nothing else counts it: best effort. A durable publish that is refused is never
// acknowledged, and counted so.
func (p *Publisher) asyncError(err error) bool {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return false
	}
	if p.opts.BestEffort {
		p.drop(DropRefused)
	}
	return true
}

// prepareView stamps a view event and names its subject: the agent's when the
// decision read its record, else the one subject of the rest (bus.AuditNoAgent).
func prepareView(ctx context.Context, ns bus.Namespace, e *View) string {
	e.Time = stamp(e.Time)
	e.TraceID = telemetry.TraceID(ctx)
	if !directory.ValidID(e.Agent) {
		e.Agent = ""
	}
	e.Count = 1
	if e.Team == "" {
		return ns.AuditView(bus.AuditNoAgent)
	}
	return ns.AuditView(e.Agent)
}

// View publishes a view decision's event through the buffer (a frame's goes through
// Frame). ctx is the request's (for its trace id).
func (p *Publisher) View(ctx context.Context, e View) {
	if p == nil {
		return
	}
	subject := prepareView(ctx, p.ns, &e)
	p.emit(&item{subject: subject, view: &e, fold: foldKey(subject, &e)})
}

// Frame publishes the event of a frame about to be served and waits, until ctx ends or
// wire.AuditTimeout passes, for the stream's acknowledgement. Without it, it returns
// ErrUnavailable: the frame must be discarded, and the decision's event becomes the
// 503 audit_unavailable the viewer is answered, queued under the same sequence number
// and message id (so the trail holds one event of the decision: the frame's, if the
// stream kept it and only its acknowledgement was lost, else the 503's). Best effort,
// it queues the event and returns nil.
func (p *Publisher) Frame(ctx context.Context, e View) error {
	if p == nil {
		return nil
	}
	e.Outcome, e.Reason = OutcomeFrame, ""
	subject := prepareView(ctx, p.ns, &e)
	if p.opts.BestEffort {
		p.emit(&item{subject: subject, view: &e})
		return nil
	}
	e.Origin = p.next()
	err := p.publishAcked(ctx, &item{subject: subject, view: &e}, wire.AuditTimeout)
	if err == nil {
		return nil
	}
	failed := e
	failed.Outcome, failed.Reason = OutcomeUnavailable, wire.ReasonAuditUnavailable
	p.emit(&item{subject: subject, view: &failed})
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// Admin publishes an admin change's event through the buffer. ctx is the change's.
func (p *Publisher) Admin(ctx context.Context, e Admin) {
	if p == nil {
		return
	}
	it, err := p.adminItem(ctx, e)
	if err != nil {
		p.drop(DropInvalid)
		return
	}
	p.emit(it)
}

// AdminAcked publishes an admin change's event and waits, until ctx ends, for the
// stream's acknowledgement: the operator CLI's, which reports a change it could not
// record. Best effort, it waits for the server to have it.
func (p *Publisher) AdminAcked(ctx context.Context, e Admin) error {
	if p == nil {
		return nil
	}
	it, err := p.adminItem(ctx, e)
	if err != nil {
		p.drop(DropInvalid)
		return err
	}
	*it.origin() = p.next()
	if p.opts.BestEffort {
		data, err := it.encode()
		if err != nil {
			return err
		}
		if err := p.conn.PublishMsg(msg(it, data)); err != nil {
			return err
		}
		return p.conn.FlushWithContext(ctx)
	}
	return p.publishAcked(ctx, it, 0)
}

func (p *Publisher) adminItem(ctx context.Context, e Admin) (*item, error) {
	e.Time = stamp(e.Time)
	e.TraceID = telemetry.TraceID(ctx)
	e.Source, e.Count = p.opts.Source, 1
	if e.IDs == nil {
		e.IDs = map[string]string{}
	}
	subject, err := p.ns.AuditAdmin(SourceToken(e.Source), e.Action)
	if err != nil {
		return nil, err
	}
	return &item{subject: subject, admin: &e}, nil
}

// next is the next Origin of this boot.
func (p *Publisher) next() Origin {
	o := p.origin
	o.Seq, o.Count = p.seq.Add(1), 1
	return o
}

// foldKey is what makes two refusals identical: everything the event says but its
// time's milliseconds and, for a viewer not identified, the agent asked for (an
// outsider picks it). Answers (frame, no_tab, not_live) never fold.
func foldKey(subject string, e *View) string {
	switch e.Outcome {
	case OutcomeFrame, "no_tab", "not_live":
		return ""
	}
	agent := e.Agent
	if e.ViewerID == "" {
		agent = "*"
	}
	b, _ := json.Marshal([]any{subject, e.Time.Unix(), e.ViewerKind, e.ViewerID, agent, e.Team, e.Organisation, e.Session, e.Outcome, e.Reason})
	return string(b)
}

// emit queues it, or folds it into an identical refusal held or still queued, or
// drops it. A refusal is held until its second ends (FoldWindow): identical ones of
// that second fold into it, so that a flood of them — an outsider's 401s — costs the
// stream an event a second, not one a request.
func (p *Publisher) emit(it *item) {
	data, err := it.encode()
	if err != nil || len(data) > MaxEventBytes {
		p.drop(DropInvalid)
		return
	}
	it.size = len(data)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.drop(DropClosed)
		return
	}
	if it.fold != "" {
		if held := p.folds[it.fold]; held != nil {
			held.view.Count++
			if held.view.Agent != it.view.Agent {
				held.view.Agent = ""
			}
			p.mu.Unlock()
			return
		}
	}
	if len(p.queue)+len(p.holding) >= Buffer || p.buffered+it.size > MaxBufferedBytes {
		p.mu.Unlock()
		p.drop(DropFull)
		return
	}
	p.buffered += it.size
	if it.fold != "" {
		p.folds[it.fold] = it
		it.held = true
		it.due = it.view.Time.Truncate(FoldWindow).Add(FoldWindow)
		p.holding = append(p.holding, it)
		p.mu.Unlock()
		due := it.due
		time.AfterFunc(time.Until(due), func() { p.release(due) })
		return
	}
	p.queue = append(p.queue, it)
	p.mu.Unlock()
	p.signal()
}

// release queues the held refusals whose window ended by due (the window of the timer
// that calls it), in the order they came. Not by the clock's now: a window's end is a
// wall-clock time, and a wall clock stepped or slewed behind the timer's monotonic one
// would leave its refusals held until some later window's timer.
func (p *Publisher) release(due time.Time) {
	p.mu.Lock()
	p.queueHeld(due)
	p.mu.Unlock()
	p.signal()
}

// queueHeld queues the held refusals due by now (all, for a zero now), in the order
// they came; p.mu is held.
func (p *Publisher) queueHeld(now time.Time) {
	kept := p.holding[:0]
	for _, it := range p.holding {
		if !now.IsZero() && it.due.After(now) {
			kept = append(kept, it)
			continue
		}
		it.held = false
		p.queue = append(p.queue, it)
	}
	clear(p.holding[len(kept):])
	p.holding = kept
}

// signal wakes the drain.
func (p *Publisher) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take removes the queue's first item; nil when the queue is empty and closed.
func (p *Publisher) take() *item {
	for {
		p.mu.Lock()
		if len(p.queue) > 0 {
			it := p.queue[0]
			p.queue[0] = nil
			p.queue = p.queue[1:]
			p.buffered -= it.size
			if it.fold != "" {
				delete(p.folds, it.fold)
			}
			p.mu.Unlock()
			return it
		}
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return nil
		}
		<-p.wake
	}
}

// pending is how many events wait in the buffer.
func (p *Publisher) pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

// drain publishes the queue's events in order until Close.
func (p *Publisher) drain() {
	defer close(p.drained)
	if p.opts.BestEffort {
		p.drainBestEffort()
		return
	}
	for {
		it := p.take()
		if it == nil {
			return
		}
		if o := it.origin(); o.Seq == 0 {
			*o = Origin{Replica: p.origin.Replica, Boot: p.origin.Boot, Seq: p.seq.Add(1), Count: o.Count}
		}
		p.publishRetried(it)
	}
}

// publishRetried publishes it until the stream acknowledges it, RetryFor passes, or
// Close's deadline comes; each retry carries the same message id.
func (p *Publisher) publishRetried(it *item) {
	deadline := time.Now().Add(RetryFor)
	wait := 50 * time.Millisecond
	for {
		err := p.publishAcked(p.stopped, it, AckTimeout)
		if err == nil {
			return
		}
		if errors.Is(err, errEncode) {
			p.drop(DropInvalid)
			return
		}
		if p.stopped.Err() != nil {
			p.drop(DropClosed)
			return
		}
		if time.Now().Add(wait).After(deadline) {
			p.drop(DropUnacknowledged)
			return
		}
		p.log.Debug().Err(err).Msg("audit event not acknowledged: retrying")
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-p.stopped.Done():
			t.Stop()
		}
		wait = min(2*wait, time.Second)
	}
}

var errEncode = errors.New("audit: event not encodable")

// publishAcked publishes it on JetStream and waits for the acknowledgement, at most
// timeout (0: ctx alone bounds it).
func (p *Publisher) publishAcked(ctx context.Context, it *item, timeout time.Duration) error {
	data, err := it.encode()
	if err != nil || len(data) > MaxEventBytes {
		return errEncode
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	// No retry inside the client: a stream that is not there answers at once (no
	// responders), and the caller decides whether to wait and try again.
	if _, err := p.js.PublishMsg(ctx, msg(it, data), jetstream.WithRetryAttempts(0), jetstream.WithExpectStream(bus.AuditStream)); err != nil {
		return err
	}
	p.acked.Add(1)
	return nil
}

// msg is it's message: its subject, data and message id.
func msg(it *item, data []byte) *nats.Msg {
	m := nats.NewMsg(it.subject)
	m.Data = data
	m.Header.Set(jetstream.MsgIDHeader, it.origin().MsgID())
	return m
}

// drainBestEffort publishes the queue's events on core NATS in order until Close,
// confirming with the server every FlushEvery events and whenever the queue runs
// empty.
func (p *Publisher) drainBestEffort() {
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
		if p.pending() == 0 {
			flush()
		}
		it := p.take()
		if it == nil {
			flush()
			return
		}
		*it.origin() = Origin{Replica: p.origin.Replica, Boot: p.origin.Boot, Seq: p.seq.Add(1), Count: it.origin().Count}
		data, err := it.encode()
		if err != nil {
			p.drop(DropInvalid)
			continue
		}
		if err := p.conn.PublishMsg(msg(it, data)); err != nil {
			p.drop(DropPublish)
			continue
		}
		p.acked.Add(1)
		if unflushed++; unflushed >= FlushEvery {
			flush()
		}
	}
}

// Dropped is how many events were dropped so far, for every cause.
func (p *Publisher) Dropped() uint64 {
	if p == nil {
		return 0
	}
	var n uint64
	for i := range p.drops {
		n += p.drops[i].Load()
	}
	return n
}

// Drops is how many events were dropped so far for cause (one of DropReasons).
func (p *Publisher) Drops(cause string) uint64 {
	if p == nil {
		return 0
	}
	for i, r := range DropReasons {
		if r == cause {
			return p.drops[i].Load()
		}
	}
	return 0
}

// Published is how many events the stream acknowledged (best effort: were sent).
func (p *Publisher) Published() uint64 {
	if p == nil {
		return 0
	}
	return p.acked.Load()
}

// drop counts one dropped event and logs it, at most once per DropLogInterval, with
// the count so far and why: never the event.
func (p *Publisher) drop(why string) {
	for i, r := range DropReasons {
		if r == why {
			p.drops[i].Add(1)
		}
	}
	now := time.Now().UnixNano()
	last := p.lastLog.Load()
	if now-last < int64(DropLogInterval) || !p.lastLog.CompareAndSwap(last, now) {
		return
	}
	p.log.Warn().Str("why", why).Uint64("dropped", p.Dropped()).Msg("audit events dropped")
}

// Close publishes what is buffered, waiting until ctx ends at most, then closes the
// connection; what is left then is dropped (and counted). It returns ctx's error when
// the buffer was not emptied in time. An event emitted after Close is dropped.
func (p *Publisher) Close(ctx context.Context) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	p.closed = true
	p.queueHeld(time.Time{}) // now rather than at their windows' end
	p.mu.Unlock()
	p.signal()
	var err error
	select {
	case <-p.drained:
	case <-ctx.Done():
		err = ctx.Err()
		p.stop() // the drain's wait ends, and what is left is counted
		p.mu.Lock()
		left := len(p.queue)
		p.queue, p.folds, p.buffered = nil, map[string]*item{}, 0
		p.mu.Unlock()
		for range left {
			p.drop(DropClosed)
		}
		<-p.drained
	}
	p.stop()
	p.conn.Close()
	return err
}

// stamp is t (or now, when t is zero) in UTC, to the millisecond.
func stamp(t time.Time) time.Time {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UTC().Truncate(time.Millisecond)
}

// The audit stream's limits as Stream sets them; docs/operating.md gives the load they
// hold and how a platform sizes its own.
const (
	// StreamMaxAge is how long the stream keeps an event: 400 days, a year and a month.
	StreamMaxAge = 400 * 24 * time.Hour
	// StreamMaxBytes bounds the stream's store. It refuses new events when full
	// (DiscardNew): frames are answered 503 audit_unavailable rather than a record
	// made room for.
	StreamMaxBytes = 8 << 30 // 8 GiB
	// StreamDuplicates is the window in which a second message with an event's
	// Nats-Msg-Id is recognised as a retry and kept once.
	StreamDuplicates = 2 * time.Minute
)

// Stream is the configuration of namespace ns's audit stream (bus.AuditStream) on a
// single server: file storage, the limits above, no message deleted or purged through
// the API. A cluster sets Replicas to 3 (docs/operating.md, "Audit trail").
func Stream(ns bus.Namespace) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        bus.AuditStream,
		Description: "Agentfy's audit trail of " + ns.Prefix() + ": every view decision and admin change",
		Subjects:    []string{ns.AuditWildcard()},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew,
		MaxAge:      StreamMaxAge,
		MaxBytes:    StreamMaxBytes,
		MaxMsgSize:  MaxEventBytes + 1024, // the event and its headers
		Storage:     jetstream.FileStorage,
		Replicas:    1,
		Duplicates:  StreamDuplicates,
		DenyDelete:  true,
		DenyPurge:   true,
	}
}
