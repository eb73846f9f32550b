package view

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/access"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/wire"
)

// Bounds of the requesting replica.
const (
	// MaxInFlight is the most view requests one replica waits for at once; the next is
	// refused at once with ErrBusy.
	MaxInFlight = 128
	// MaxReply bounds the sealed reply read from NATS.
	MaxReply = 8 << 20 // 8 MiB
)

// Errors the HTTP edge maps to statuses.
var (
	// ErrRateLimited: the agent's window was taken, or the caller's own pace still runs
	// (429, Retry-After: see RateLimitedError).
	ErrRateLimited = errors.New("view: rate limited")
	// ErrBusy: this replica already waits for MaxInFlight views (503).
	ErrBusy = errors.New("view: too many views in flight")
	// ErrUnavailable: the frame could not be had — no channel, old image, broker busy or
	// refused, capture failed, timeout, or a reply that does not open or validate (503).
	// It is never reported as "not live".
	ErrUnavailable = errors.New("view: unavailable")
)

// UnavailableError says why a view was unavailable. errors.Is(err, ErrUnavailable) holds.
type UnavailableError struct{ Reason string }

func (e *UnavailableError) Error() string   { return "view: unavailable: " + e.Reason }
func (e *UnavailableError) Is(t error) bool { return t == ErrUnavailable }
func unavailable(reason string) error       { return &UnavailableError{Reason: reason} }

// RateLimitedError is a request the gate refused; it is ErrRateLimited. RetryAfter is
// how long the caller should wait: what is really left of its own pace, or the window.
type RateLimitedError struct{ RetryAfter time.Duration }

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("view: rate limited (retry after %v)", e.RetryAfter)
}

// Is makes errors.Is(err, ErrRateLimited) hold.
func (e *RateLimitedError) Is(target error) bool { return target == ErrRateLimited }

// Service runs a view request on the requesting replica: the access check, the
// session, the gate, the grant, the NATS request, opening and validating the page,
// and the re-checks.
type Service struct {
	rdb       redis.UniversalClient // for the two round trips of the checks (check.go)
	gate      Decider
	grants    *Grants
	sessions  *session.Store
	dir       *directory.Store // an access check's records (check.go)
	creds     *auth.Store      // a partner's key, verified again (check.go)
	requester Requester
	newKey    func() (*ecdh.PrivateKey, error)
	ns        bus.Namespace
	log       zerolog.Logger
	tracer    trace.Tracer
	inFlight  chan struct{} // a slot per view in flight; guarded by channel semantics
}

// Decider decides whether a view request may go ahead now: the Gate.
type Decider interface {
	// Decide is Gate.Decide: a refusal is a Decision, an error means it cannot decide;
	// a grant given is written in the same round trip, and only if the request is let
	// through.
	Decide(ctx context.Context, agentID, caller string, grants ...Grant) (Decision, error)
}

// Requester carries a view request to the replica that holds the worker's socket: the
// replica's NATS connection (bus.Client).
type Requester interface {
	// Connected reports whether a request can leave now.
	Connected() bool
	// RequestMsg sends msg and waits for the reply until ctx ends; its errors are
	// bus.Request's (bus.ErrNoResponders, bus.ErrTimeout, *bus.RemoteError).
	RequestMsg(ctx context.Context, msg *nats.Msg) ([]byte, error)
}

// ServiceConfig wires a Service. Its collaborators are interfaces so that the
// development stack (internal/dev/stack) can wrap them to watch and steer a running replica
// — the gate's decisions, the replies, each request's key — from outside this package.
type ServiceConfig struct {
	Redis     redis.UniversalClient // for the two round trips of the checks (check.go)
	Gate      Decider
	Grants    *Grants
	Sessions  *session.Store   // the session reads of both round trips
	Directory *directory.Store // an access check's records
	Creds     *auth.Store      // a partner's key, verified again at the re-check
	Requester Requester
	Namespace bus.Namespace
	Log       zerolog.Logger
	// NewKey makes the key pair each request's frame is sealed to; nil means a fresh
	// P-256 key from crypto/rand (envelope.GenerateKey).
	NewKey func() (*ecdh.PrivateKey, error)
	// Tracer, when set, gets the span of each view's NATS request (its trace context
	// travels in the message's headers); nil means tracing off.
	Tracer trace.TracerProvider
}

// NewService wires the view service of one replica.
func NewService(cfg ServiceConfig) *Service {
	if cfg.NewKey == nil {
		cfg.NewKey = func() (*ecdh.PrivateKey, error) { return envelope.GenerateKey(rand.Reader) }
	}
	return &Service{
		rdb: cfg.Redis, gate: cfg.Gate, grants: cfg.Grants, sessions: cfg.Sessions, dir: cfg.Directory, creds: cfg.Creds,
		requester: cfg.Requester, newKey: cfg.NewKey, ns: cfg.Namespace, log: cfg.Log, tracer: telemetry.Tracer(cfg.Tracer),
		inFlight: make(chan struct{}, MaxInFlight),
	}
}

// InFlight is the number of view requests this replica waits for now.
func (s *Service) InFlight() int { return len(s.inFlight) }

// View answers one view request for agentID, from caller (who asks, for the per-caller
// pace), if check lets caller see the agent. Its Redis round trips, in order:
//
//  1. the first check's reads with the agent's current session id (none when the check
//     is decided without a read; a member's check may read more, access.Check);
//  2. that session's record (and Current's two reads when it has ended meanwhile);
//  3. the gate (Gate.Decide), only after access is granted, so that strangers cannot
//     burn another team's window, and only for a running or idle session, with the
//     capture's grant written beside it; then the frame's NATS request (frame);
//  4. the re-check's reads with the session's record (a session stops being the agent's
//     current one only by being stopped, session.Store.Start), before any pixel leaves.
//
// The owner replica makes none (it checks the request's proof, Grants.Vouched), and the
// broker's consume call one (Grants.Consume): five for a view that is served.
//
// The Result's Seen is filled as far as the view got, also when it returns an error.
func (s *Service) View(ctx context.Context, agentID, caller string, check access.Check) (Result, error) {
	var seen Seen
	res, err := s.view(ctx, agentID, caller, check, &seen)
	res.Seen = seen
	return res, err
}

// view is View, noting what it learns in seen.
func (s *Service) view(ctx context.Context, agentID, caller string, check access.Check, seen *Seen) (Result, error) {
	// 1. The first check.
	reads, err := check.Reads(false)
	if err != nil {
		return Result{}, err
	}
	facts, currentID, err := s.firstRead(ctx, agentID, reads) // err: the session pointer's
	seen.saw(facts)
	if authErr := check.Decide(ctx, facts); authErr != nil {
		return Result{}, authErr
	}
	// 2. The session. The gate limits capture requests: a request that finds no running
	// or idle session is answered before it (SPEC §3.2), takes no window and no pace.
	var sess session.Session
	if err == nil {
		sess, err = s.sessions.Live(ctx, currentID)
		if errors.Is(err, session.ErrNoSession) {
			// The session the pointer named has ended: the agent may have a new one since.
			sess, err = s.sessions.Current(ctx, agentID)
		}
	}
	if errors.Is(err, session.ErrNoSession) {
		return Result{Live: false}, nil
	}
	if err != nil {
		return Result{}, err
	}
	seen.Session = sess.ID
	// The view's span (the HTTP edge's) names the session it asked.
	trace.SpanFromContext(ctx).SetAttributes(telemetry.AttrSessionID.String(sess.ID))
	// 3. The gate, and the capture's grant beside it.
	req, err := s.newRequest(sess)
	if err != nil {
		return Result{}, err
	}
	decision, err := s.gate.Decide(ctx, agentID, caller, req.grant)
	if err != nil {
		return Result{}, err
	}
	if !decision.Allowed {
		return Result{}, &RateLimitedError{RetryAfter: decision.RetryAfter}
	}
	// The capture.
	page, obsErr := s.frame(ctx, sess, req)
	// 4. The re-check. The capture took time: the session may have stopped and access
	// may have been revoked meanwhile. Check both before any pixel leaves. A session
	// that stopped explains a failed capture too (its passes were revoked, its socket
	// closed): that is "not live", which is true, rather than "unavailable".
	if reads, err = check.Reads(true); err != nil {
		return Result{}, err
	}
	facts, err = s.recheckRead(ctx, agentID, sess.ID, reads)
	seen.saw(facts)
	switch {
	case errors.Is(err, session.ErrNoSession):
		if authErr := check.Decide(ctx, facts); authErr != nil {
			return Result{}, authErr
		}
		return Result{Live: false}, nil
	case obsErr != nil:
		return Result{}, obsErr
	case err != nil:
		return Result{}, err
	}
	if err := check.Decide(ctx, facts); err != nil {
		return Result{}, err
	}
	return Result{Live: true, Page: page}, nil
}

// viewRequest is what one view's capture is asked with: its request id, the key pair
// its frame is sealed to, and its grant.
type viewRequest struct {
	id    string
	priv  *ecdh.PrivateKey
	grant Grant
}

// newRequest makes a view request of sess: a random 256-bit request id, a fresh key
// pair, and the grant that lets the session's broker learn the public key once.
func (s *Service) newRequest(sess session.Session) (viewRequest, error) {
	idb := make([]byte, 32)
	if _, err := rand.Read(idb); err != nil {
		return viewRequest{}, fmt.Errorf("view: request id: %w", err)
	}
	requestID := hex.EncodeToString(idb)
	priv, err := s.newKey()
	if err != nil {
		return viewRequest{}, fmt.Errorf("view: key: %w", err)
	}
	g, err := s.grants.New(requestID, sess.ID, sess.BrokerPassID, envelope.PublicKeyHex(priv))
	if err != nil {
		return viewRequest{}, err
	}
	return viewRequest{id: requestID, priv: priv, grant: g}, nil
}

// frame asks the replica holding sess's worker socket for a frame of req, whose grant
// the gate wrote, and opens it. A nil page with a nil error means the worker has no tab
// open. Whatever keeps the request from leaving deletes the grant.
func (s *Service) frame(ctx context.Context, sess session.Session, req viewRequest) (*wire.Page, error) {
	var refused error
	select {
	case s.inFlight <- struct{}{}:
		defer func() { <-s.inFlight }()
		switch {
		case !sess.HasFeature(wire.FeatureBrowserView) && sess.Owner != "":
			// The worker said in its hello that its image cannot relay views: refuse
			// without dispatching anything.
			refused = unavailable(wire.ReasonUnsupported)
		case !s.requester.Connected():
			// While NATS reconnects a request would sit in the reconnect buffer until its
			// deadline; answer at once instead.
			refused = unavailable(wire.ReasonNoChannel)
		}
	default:
		refused = ErrBusy
	}
	ctx, cancel := context.WithTimeout(ctx, wire.ViewTimeout)
	defer cancel()
	var (
		page *wire.Page
		err  = refused
	)
	if refused == nil {
		page, err = s.request(ctx, sess, req)
	}
	if err != nil {
		// The grant may not have been redeemed; do not leave it for 10 s. The
		// request's own context may be over, so use a short one of our own.
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = s.grants.Delete(dctx, req.grant)
		dcancel()
		return nil, err
	}
	return page, nil
}

// request is the view's NATS request to the owner, in a span of its own, and the
// opening of its reply.
func (s *Service) request(ctx context.Context, sess session.Session, req viewRequest) (page *wire.Page, err error) {
	subject, err := s.ns.Subject(bus.VerbView, sess.ID)
	if err != nil {
		return nil, err
	}
	proof, err := s.grants.Proof(req.id, sess.ID, time.Now())
	if err != nil {
		return nil, err
	}
	ctx, span := s.tracer.Start(ctx, telemetry.SpanViewRequest, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(telemetry.MessagingSend(s.ns.SubjectTemplate(bus.VerbView))...),
		trace.WithAttributes(telemetry.AttrAgentID.String(sess.AgentID), telemetry.AttrSessionID.String(sess.ID)))
	defer func() {
		var u *UnavailableError
		if errors.As(err, &u) {
			telemetry.End(span, telemetry.OutcomeUnavailable, u.Reason)
			return
		}
		telemetry.End(span, telemetry.OutcomeOK, "")
	}()
	// Only the request id travels on NATS, with the proof that a replica made it: the
	// public key goes from Redis to the broker alone (whoever knows it could seal a
	// forged page).
	msg := &nats.Msg{Subject: subject, Data: []byte(req.id), Header: nats.Header{bus.HeaderProof: []string{proof}}}
	reply, err := s.requester.RequestMsg(ctx, msg)
	if err != nil {
		return nil, unavailableFrom(err)
	}
	page, err = openReply(req.priv, req.id, reply)
	if err != nil {
		return nil, unavailable(wire.ReasonInvalid)
	}
	return page, nil
}

// unavailableFrom turns a failed NATS request into the view's reason: the owner's code, as it
// came, when it is one of the wire reasons.
func unavailableFrom(err error) error {
	var re *bus.RemoteError
	switch {
	case errors.Is(err, bus.ErrNoResponders):
		return unavailable(wire.ReasonNoChannel)
	case errors.Is(err, bus.ErrTimeout):
		return unavailable(wire.ReasonTimeout)
	case errors.As(err, &re):
		return unavailable(wire.Reason(re.Code))
	default:
		return fmt.Errorf("%w: %v", unavailable(wire.ReasonFailed), err)
	}
}

// openReply decodes the wire body strictly, opens it and validates the page. Every
// failure is the same to the caller.
func openReply(priv *ecdh.PrivateKey, requestID string, reply []byte) (*wire.Page, error) {
	if len(reply) > MaxReply {
		return nil, wire.ErrInvalidPage
	}
	var sealed envelope.Sealed
	if err := wire.DecodeStrict(reply, &sealed); err != nil {
		return nil, wire.ErrInvalidPage
	}
	// The plaintext lives only until the page is parsed (its members are copies), in a
	// buffer lent for the moment and zeroed when given back.
	bp := wire.Scratch()
	defer wire.Release(bp)
	plain, err := envelope.OpenTo((*bp)[:cap(*bp)], priv, requestID, sealed.Envelope)
	if cap(plain) > cap(*bp) {
		*bp = plain[:0] // a larger frame than the buffer held: keep the larger one
	}
	if err != nil {
		return nil, err
	}
	return wire.ParsePage(plain)
}

// saw notes the agent's record of f, when the check read it.
func (seen *Seen) saw(f access.Facts) {
	if f.AgentErr == nil && f.Agent.ID != "" {
		seen.Team, seen.Organisation = f.Agent.TeamID, f.Agent.OrgID
	}
}
