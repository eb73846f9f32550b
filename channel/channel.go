// Package channel is the API replica's end of the worker tool channel: one WebSocket per
// worker session, authenticated with the worker pass, speaking JSON-RPC 2.0. While a
// socket lives, its replica subscribes to the session's view and tool subjects on NATS,
// so requests from any replica reach the one holding the socket and no other.
//
// Views and tools are kept apart: a view request takes a slot of its connection's
// observation waiter map (MaxObservationWaiters, ObservationTimeout) and is relayed as
// agentfy/browserView; it never touches tool routing, the session clock or the activity
// log. Only tool calls do.
package channel

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/view/envelope"
	"github.com/agentfy/agentfy/wire"
)

// Limits of one worker connection.
const (
	// MaxObservationWaiters is how many view requests one connection relays at once; the
	// next is refused at once.
	MaxObservationWaiters = 8
	// ObservationTimeout bounds one relayed view request from its arrival, the
	// capability check included: the owner's hop of wire.Budget.
	ObservationTimeout = wire.ChannelObserveTimeout
	// MaxToolWaiters is how many tool calls one connection relays at once.
	MaxToolWaiters = 16
	// ToolTimeout bounds one tool call.
	ToolTimeout = 60 * time.Second
	// HelloTimeout bounds the wait for the worker's hello after the upgrade.
	HelloTimeout = 10 * time.Second
	// WriteTimeout bounds one WebSocket write.
	WriteTimeout = 10 * time.Second
	// PingInterval is how often the replica pings the worker; a worker that does not
	// answer within PingTimeout is dropped.
	PingInterval = 15 * time.Second
	PingTimeout  = 10 * time.Second
	// MaxToolRequest bounds a tool call arriving over NATS.
	MaxToolRequest = 1 << 20 // 1 MiB
	// ObservationBurst and ObservationRate pace the view requests relayed to one worker:
	// a few at once, then about one a second. The HTTP gate lets one view per agent
	// through every 2 s, so only requests that never passed it (a flood on the bus)
	// meet this bound; the excess is answered busy at once, without touching the
	// worker or the consume route.
	ObservationBurst = 3
	ObservationRate  = rate.Limit(1) // per second
	// CapabilityCheckTimeout bounds the Redis lookup that proves a view request was
	// made by a replica that stored its capability.
	CapabilityCheckTimeout = wire.OwnerCheckTimeout
)

// Capabilities is what the hub needs of the view capabilities (view.Capabilities).
type Capabilities interface {
	// Pending reports whether requestID names a capability of sessionID still to be
	// redeemed; an error means it cannot tell (Redis unreachable).
	Pending(ctx context.Context, requestID, sessionID string) (bool, error)
}

// Status events are published by this package through an EventPublisher.
type EventPublisher interface {
	Publish(ctx context.Context, ev session.Event)
}

// Config wires a Hub.
type Config struct {
	ReplicaID string
	Creds     *auth.Store
	Sessions  *session.Store
	// Capabilities proves that a view request on the bus comes from a replica that
	// stored its capability: any other request is refused before it reaches the worker.
	Capabilities Capabilities
	NATS         *nats.Conn
	Namespace    bus.Namespace
	Events       EventPublisher
	Log          zerolog.Logger
	// Tick is how often held sessions are checked for idle and stop; 0 means 1 s.
	Tick time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Hub holds this replica's worker connections.
type Hub struct {
	cfg Config

	mu     sync.Mutex
	conns  map[string]*Conn // by session id; guarded by mu
	closed bool             // guarded by mu

	wg sync.WaitGroup

	envelopeHook atomic.Pointer[func([]byte) []byte]    // test hook; nil in production
	relayHook    atomic.Pointer[func(requestID string)] // runs once a capability checked out; tests only
	helloHook    atomic.Pointer[func(*Conn)]            // runs before the hello's answer; tests only

	// Counts of the view requests that arrived on the bus: relayed to a worker, refused
	// because no replica stored their capability, or answered busy by the pace.
	ViewsRelayed, ViewsRefused, ViewsPaced atomic.Int64

	// key opens tool calls sealed to this replica; its public half is published with
	// each session this replica holds. It lives only in this process's memory.
	key *ecdh.PrivateKey
}

// SetEnvelopeHook installs a function that may replace a worker's sealed answer before
// it is relayed (the reliability suite tampers with envelopes through it); nil removes
// it. Production never sets it.
func (h *Hub) SetEnvelopeHook(f func([]byte) []byte) {
	if f == nil {
		h.envelopeHook.Store(nil)
		return
	}
	h.envelopeHook.Store(&f)
}

// SetRelayHook installs a function that runs once a view request's capability checked
// out, before the request is relayed to the worker (the reliability suite rewrites the
// capability in Redis there, as a Redis writer racing the broker would); nil removes
// it. Production never sets it.
func (h *Hub) SetRelayHook(f func(requestID string)) {
	if f == nil {
		h.relayHook.Store(nil)
		return
	}
	h.relayHook.Store(&f)
}

// NewHub returns a Hub; call Run to start its session checks and Close to end it.
func NewHub(cfg Config) *Hub {
	if cfg.Tick == 0 {
		cfg.Tick = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	key, err := envelope.GenerateKey(rand.Reader)
	if err != nil {
		panic(fmt.Sprintf("channel: generate key: %v", err)) // crypto/rand does not fail
	}
	return &Hub{cfg: cfg, conns: map[string]*Conn{}, key: key}
}

// RefillPace fills the relay pace of every connection, as if each had been quiet for a
// while. Tests that poll faster than the HTTP gate allows — standing in for the 5 s
// between two polls by clearing the gate — call it with the gate; production never does.
func (h *Hub) RefillPace() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		c.relays.Store(rate.NewLimiter(ObservationRate, ObservationBurst))
	}
}

// Conns is the number of worker sockets this replica holds.
func (h *Hub) Conns() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// ObservationWaiters is the number of view requests relayed now, over all connections.
func (h *Hub) ObservationWaiters() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.conns {
		n += int(c.observing.Load())
	}
	return n
}

// Conn is one worker connection.
type Conn struct {
	hub     *Hub
	ws      *websocket.Conn
	session session.Session
	log     zerolog.Logger
	ctx     context.Context // ends when the connection ends
	cancel  context.CancelFunc

	// helloed is closed once the hello's answer is on the socket: a request that the
	// subscriptions (live before that answer, so that no caller meets a session with no
	// responder) hand over sooner waits for it, since a worker takes any first message
	// other than that answer as a refusal.
	helloed chan struct{}

	nextID    atomic.Uint64
	observing atomic.Int32 // observation waiters in use
	tooling   atomic.Int32 // tool waiters in use
	// relays paces the view requests relayed to the worker (ObservationBurst,
	// ObservationRate); it is safe for concurrent use, and replaced by RefillPace.
	relays atomic.Pointer[rate.Limiter]

	mu sync.Mutex
	// Two waiter maps, so that observations never share a bound or a table with tool
	// routing: viewWaiters holds at most MaxObservationWaiters, toolWaiters at most
	// MaxToolWaiters (the counters above reserve the slots).
	viewWaiters map[uint64]chan *jsonrpc.Message // guarded by mu
	toolWaiters map[uint64]chan *jsonrpc.Message // guarded by mu
	status      session.Status                   // last published; guarded by mu
	subs        []*nats.Subscription             // guarded by mu
}

// errConnClosed is returned to waiters of a connection that ended.
var errConnClosed = errors.New("channel: connection closed")

// ServeHTTP serves GET /v1/worker/channel: a WebSocket for one worker, authenticated by
// its worker pass (Authorization: Bearer). A broker pass, an unknown pass or a stopped
// session's pass are refused before the upgrade.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token := auth.BearerToken(r.Header.Get("Authorization"))
	pass, err := h.cfg.Creds.VerifyPass(r.Context(), token, auth.RoleWorker)
	switch {
	case errors.Is(err, auth.ErrForbidden):
		http.Error(w, "worker pass required", http.StatusForbidden)
		return
	case errors.Is(err, auth.ErrUnauthenticated):
		http.Error(w, "worker pass required", http.StatusUnauthorized)
		return
	case err != nil:
		h.cfg.Log.Error().Err(err).Msg("verify worker pass")
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	sess, err := h.cfg.Sessions.Get(r.Context(), pass.SessionID)
	if err != nil && !errors.Is(err, session.ErrNotFound) {
		// The store cannot be read (Redis down): the session may well be live, and a
		// 401 would send its worker home for good. The worker retries a 503.
		h.cfg.Log.Error().Err(err).Msg("read session")
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	if err != nil || h.cfg.Sessions.Status(sess) == session.Stopped {
		// A worker that was away past the idle timeout comes back to a stopped session:
		// record the stop (and revoke its passes) if nobody has yet, and send it home.
		if err == nil && !sess.Stopped {
			if _, serr := h.cfg.Sessions.Stop(r.Context(), sess.ID, "idle timeout"); serr == nil && h.cfg.Events != nil {
				h.cfg.Events.Publish(r.Context(), session.Event{AgentID: sess.AgentID, SessionID: sess.ID, Status: session.Stopped, At: h.cfg.Now()})
			}
		}
		http.Error(w, "session is not live", http.StatusUnauthorized)
		return
	}
	// The socket lives as long as the session: lift the server's read deadline now that
	// the worker is authenticated (the ping loop and read limits bound it from here).
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{})
	if err != nil {
		return // Accept has answered
	}
	// The hello is small: a larger first message ends the socket before it is read
	// whole (the limit is raised once the hello passed).
	ws.SetReadLimit(jsonrpc.MaxHelloBytes)
	h.serve(context.WithoutCancel(r.Context()), ws, sess)
}

func (h *Hub) serve(parent context.Context, ws *websocket.Conn, sess session.Session) {
	ctx, cancel := context.WithCancel(parent)
	c := &Conn{
		hub: h, ws: ws, session: sess, ctx: ctx, cancel: cancel,
		log:         h.cfg.Log.With().Str("session", sess.ID).Logger(),
		viewWaiters: map[uint64]chan *jsonrpc.Message{},
		toolWaiters: map[uint64]chan *jsonrpc.Message{},
		helloed:     make(chan struct{}),
	}
	c.relays.Store(rate.NewLimiter(ObservationRate, ObservationBurst))
	defer c.close(websocket.StatusNormalClosure, "bye")

	hello, helloID, err := c.readHello(ctx)
	if err != nil {
		// The error names the rule broken, never the hello's content.
		c.log.Warn().Err(err).Msg("worker hello refused")
		c.close(websocket.StatusPolicyViolation, "hello refused: "+err.Error())
		return
	}
	c.ws.SetReadLimit(jsonrpc.MaxMessage)
	c.session.Hello = hello
	// Registered before the attach: a connection of the same session that this one
	// replaces sees that it is no longer current and leaves the owner alone, whenever it
	// ends (see unregister).
	if !h.register(c) {
		return
	}
	defer h.unregister(ctx, c)
	if err := h.cfg.Sessions.Attach(ctx, sess.ID, h.cfg.ReplicaID, envelope.PublicKeyHex(h.key), hello); err != nil {
		c.log.Error().Err(err).Msg("attach session")
		return
	}
	if err := c.subscribe(); err != nil {
		c.log.Error().Err(err).Msg("subscribe session subjects")
		return
	}
	if f := h.helloHook.Load(); f != nil {
		(*f)(c)
	}
	res, _ := json.Marshal(jsonrpc.HelloResult{SessionID: sess.ID})
	if err := c.write(ctx, encoded(jsonrpc.NewResult(helloID, res))); err != nil {
		return
	}
	close(c.helloed)
	c.log.Info().Str("image", hello.ImageTag).Strs("capabilities", hello.Capabilities).Msg("worker attached")
	c.publish(ctx, h.cfg.Sessions.Status(c.mustGet(ctx)))

	go c.pinger(ctx)
	if err := c.readLoop(ctx); websocket.CloseStatus(err) == StatusSessionEnded {
		// The worker's own end-of-session close: the one way a worker stops its session.
		sctx := context.WithoutCancel(ctx)
		h.stop(sctx, c, c.mustGet(sctx), "worker ended")
	}
}

// readHello waits for the worker's first message, which must be an agentfy/hello request
// stating bootstrap revision 2.
func (c *Conn) readHello(ctx context.Context) (session.Hello, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, HelloTimeout)
	defer cancel()
	_, data, err := c.ws.Read(ctx)
	if err != nil {
		if websocket.CloseStatus(err) == websocket.StatusMessageTooBig {
			return session.Hello{}, 0, fmt.Errorf("hello larger than %d bytes", jsonrpc.MaxHelloBytes)
		}
		return session.Hello{}, 0, errors.New("no hello")
	}
	m, err := jsonrpc.Parse(data)
	if err != nil || !m.IsRequest() || m.Method != jsonrpc.MethodHello {
		return session.Hello{}, 0, errors.New("first message is not a hello")
	}
	var p jsonrpc.HelloParams
	why := "hello params are not an object"
	if err := json.Unmarshal(m.Params, &p); err == nil {
		why = jsonrpc.ValidHello(p)
	}
	if why != "" {
		_ = c.write(ctx, encoded(jsonrpc.NewError(*m.ID, jsonrpc.CodeInvalidParams, "hello: "+why)))
		return session.Hello{}, 0, errors.New(why)
	}
	return session.Hello{ImageTag: p.ImageTag, BootstrapRevision: p.BootstrapRevision, Capabilities: p.Capabilities}, *m.ID, nil
}

// register makes c the session's connection on this replica, closing an older one (a
// worker that reconnected before its old socket timed out).
func (h *Hub) register(c *Conn) bool {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return false
	}
	old := h.conns[c.session.ID]
	h.conns[c.session.ID] = c
	h.wg.Add(1)
	h.mu.Unlock()
	if old != nil {
		// Its close handshake may wait on a dead peer: not on this connection's time.
		go old.close(websocket.StatusPolicyViolation, "replaced by a newer connection")
	}
	return true
}

func (h *Hub) unregister(ctx context.Context, c *Conn) {
	h.mu.Lock()
	current := h.conns[c.session.ID] == c
	if current {
		delete(h.conns, c.session.ID)
	}
	h.mu.Unlock()
	c.unsubscribe()
	// A connection replaced by a newer one of the same session on this replica leaves
	// the owner alone: it names this replica, and the newer connection holds it now.
	if current {
		// The connection's context is over by now; the detach gets a short one of its own.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := h.cfg.Sessions.Detach(dctx, c.session.ID, h.cfg.ReplicaID); err != nil {
			c.log.Warn().Err(err).Msg("detach session")
		}
	}
	// A lost socket never stops the session (the seed: socket loss is unavailable, not
	// stopped): views answer 503 until the worker reconnects to any replica, and only the
	// stop command, the idle timeout or the worker's own end-of-session close stop it.
	h.wg.Done()
}

func (c *Conn) mustGet(ctx context.Context) session.Session {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := c.hub.cfg.Sessions.Get(ctx, c.session.ID)
	if err != nil {
		return c.session
	}
	return s
}

func (c *Conn) subscribe() error {
	ns := c.hub.cfg.Namespace
	viewSubj, err := ns.Subject(bus.VerbView, c.session.ID)
	if err != nil {
		return err
	}
	toolSubj, err := ns.Subject(bus.VerbTool, c.session.ID)
	if err != nil {
		return err
	}
	vs, err := bus.Subscribe(c.hub.cfg.NATS, viewSubj, c.onView)
	if err != nil {
		return err
	}
	ts, err := bus.Subscribe(c.hub.cfg.NATS, toolSubj, c.onTool)
	if err != nil {
		_ = vs.Unsubscribe()
		return err
	}
	c.mu.Lock()
	c.subs = []*nats.Subscription{vs, ts}
	c.mu.Unlock()
	// Make sure the server has the interest before the worker is told it is attached.
	return c.hub.cfg.NATS.FlushTimeout(5 * time.Second)
}

func (c *Conn) unsubscribe() {
	c.mu.Lock()
	subs := c.subs
	c.subs = nil
	c.mu.Unlock()
	for _, s := range subs {
		_ = s.Unsubscribe()
	}
}

// onView handles a view request from NATS. It runs on the subscription's goroutine, so
// it decides at once (image, capability in Redis, pace, waiter slot) and hands the wait
// to a goroutine that the waiter bound limits. Nothing on the bus is believed on its
// word: a request whose capability no replica stored — a random id, or one already
// redeemed — is refused without touching the worker, and whatever passes is paced.
func (c *Conn) onView(msg *nats.Msg) {
	if len(msg.Data) == 0 {
		// A ping: an empty request is answered empty by the owner, so that a harness
		// or an operator can tell that a session's subject is served (nats req
		// agentfy.<deployment>.db<N>.view.<sessionId> ''), without touching the worker.
		_ = bus.Respond(msg, nil)
		return
	}
	requestID := string(msg.Data)
	if !envelope.ValidRequestID(requestID) {
		_ = bus.RespondError(msg, wire.ReasonBadRequest, "bad request id")
		return
	}
	if !c.session.HasCapability(wire.CapabilityBrowserView) {
		_ = bus.RespondError(msg, wire.ReasonUnsupported, "worker image cannot relay views")
		return
	}
	// One deadline from the request's arrival: the check and the relay together fit
	// the owner's hop of the budget.
	ctx, cancel := context.WithTimeout(c.ctx, ObservationTimeout)
	cctx, ccancel := context.WithTimeout(ctx, CapabilityCheckTimeout)
	ok, err := c.hub.cfg.Capabilities.Pending(cctx, requestID, c.session.ID)
	ccancel()
	switch {
	case err != nil:
		cancel()
		_ = bus.RespondError(msg, wire.ReasonFailed, "cannot check the capability")
		return
	case !ok:
		cancel()
		c.hub.ViewsRefused.Add(1)
		_ = bus.RespondError(msg, wire.ReasonRefused, "no such capability")
		return
	}
	if f := c.hub.relayHook.Load(); f != nil {
		(*f)(requestID)
	}
	if c.observing.Add(1) > MaxObservationWaiters {
		cancel()
		c.observing.Add(-1)
		_ = bus.RespondError(msg, wire.ReasonBusy, "too many observations on this connection")
		return
	}
	if !c.relays.Load().Allow() {
		cancel()
		c.observing.Add(-1)
		c.hub.ViewsPaced.Add(1)
		_ = bus.RespondError(msg, wire.ReasonBusy, "too many observations for this session")
		return
	}
	c.hub.ViewsRelayed.Add(1)
	go func() {
		defer cancel()
		res, err := c.call(ctx, jsonrpc.MethodBrowserView, jsonrpc.BrowserViewParams{RequestID: requestID})
		// The worker answered (or will not): the waiter's place is free before the
		// requester hears of it, so a requester that has its reply never finds the place
		// still taken (a view right after it counted as two).
		c.observing.Add(-1)
		if err != nil {
			code := viewReason(err)
			c.log.Debug().Str("reason", code).Msg("view relay failed")
			_ = bus.RespondError(msg, code, "view unavailable")
			return
		}
		// The envelope passes through as raw bytes: this replica cannot read it anyway.
		if h := c.hub.envelopeHook.Load(); h != nil {
			res = (*h)(res)
		}
		if err := bus.Respond(msg, res); err != nil {
			// Too large for NATS, or the connection is down: say so at once rather than
			// let the requester wait out its deadline.
			c.log.Warn().Err(err).Int("bytes", len(res)).Msg("view reply not sent")
			_ = bus.RespondError(msg, wire.ReasonFailed, "reply not sent")
		}
	}()
}

// viewReason is the wire reason of a failed relay: the worker's (which carries the
// broker's) as it came, or what this replica saw of the channel.
func viewReason(err error) string {
	var rpcErr *jsonrpc.Error
	switch {
	case errors.As(err, &rpcErr):
		return jsonrpc.ReasonOf(rpcErr)
	case errors.Is(err, context.DeadlineExceeded):
		return wire.ReasonTimeout
	case errors.Is(err, errConnClosed):
		return wire.ReasonNoChannel
	}
	return wire.ReasonFailed
}

// onTool handles a sealed tool call routed over NATS: the one path that moves the
// session clock and appends to the activity log.
func (c *Conn) onTool(msg *nats.Msg) {
	req, p, replyKey, err := openToolRequest(c.hub.key, msg.Data)
	if err != nil {
		_ = bus.RespondError(msg, "bad_request", err.Error())
		return
	}
	if c.tooling.Add(1) > MaxToolWaiters {
		c.tooling.Add(-1)
		_ = bus.RespondError(msg, "busy", "too many tool calls on this connection")
		return
	}
	go func() {
		defer c.tooling.Add(-1)
		ctx, cancel := context.WithTimeout(c.ctx, ToolTimeout)
		defer cancel()
		res, err := c.call(ctx, jsonrpc.MethodToolsCall, p)
		now := c.hub.cfg.Now()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		if rerr := c.hub.cfg.Sessions.RecordTool(rctx, c.session.ID, session.Activity{At: now, Tool: p.Name, OK: err == nil}); rerr != nil {
			c.log.Warn().Err(rerr).Msg("record tool activity")
		}
		rcancel()
		c.publish(ctx, session.Running)
		var rpcErr *jsonrpc.Error
		switch {
		case err == nil:
			// Sealed from this replica's key, whose public half the requester read from
			// the session store: a result from anyone else on the bus does not open.
			env, serr := envelope.SealFrom(rand.Reader, c.hub.key, replyKey, req.RequestID, res)
			if serr != nil {
				_ = bus.RespondError(msg, "unavailable", "cannot seal the result")
				return
			}
			b, _ := json.Marshal(envelope.Sealed{Envelope: env})
			if err := bus.Respond(msg, b); err != nil {
				c.log.Warn().Err(err).Int("bytes", len(b)).Msg("tool result not sent")
				_ = bus.RespondError(msg, "unavailable", "result not sent")
			}
		case errors.As(err, &rpcErr):
			// Broker error messages are plain and carry no URL or page text.
			_ = bus.RespondError(msg, "tool_failed", rpcErr.Message)
		case errors.Is(err, context.DeadlineExceeded):
			_ = bus.RespondError(msg, "timeout", "tool call timed out")
		default:
			_ = bus.RespondError(msg, "unavailable", "worker unavailable")
		}
	}()
}

// call sends a request on the socket and waits for its response until ctx ends.
func (c *Conn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := c.nextID.Add(1)
	ch := make(chan *jsonrpc.Message, 1)
	waiters := c.toolWaiters
	if method == jsonrpc.MethodBrowserView {
		waiters = c.viewWaiters
	}
	c.mu.Lock()
	waiters[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(waiters, id)
		c.mu.Unlock()
	}()
	select {
	case <-c.helloed:
	case <-c.ctx.Done():
		return nil, errConnClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := c.write(ctx, encoded(jsonrpc.NewRequest(id, method, params))); err != nil {
		return nil, errConnClosed
	}
	select {
	case m := <-ch:
		if m == nil {
			return nil, errConnClosed
		}
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-ctx.Done():
		if c.ctx.Err() != nil {
			return nil, errConnClosed
		}
		return nil, ctx.Err()
	}
}

// message is an encoded JSON-RPC message or the error of encoding it.
type message struct {
	b   []byte
	err error
}

func encoded(b []byte, err error) message { return message{b, err} }

func (c *Conn) write(ctx context.Context, m message) error {
	if m.err != nil {
		return m.err
	}
	b := m.b
	ctx, cancel := context.WithTimeout(ctx, WriteTimeout)
	defer cancel()
	return c.ws.Write(ctx, websocket.MessageText, b)
}

// readLoop delivers responses to their waiters until the socket ends, and returns the
// error that ended it. Requests from the worker after the hello are answered with
// method-not-found.
func (c *Conn) readLoop(ctx context.Context) error {
	for {
		data, err := jsonrpc.ReadMessage(ctx, c.ws)
		if err != nil {
			return err
		}
		m, err := jsonrpc.Parse(data)
		if err != nil {
			c.log.Warn().Msg("invalid message from worker")
			continue
		}
		switch {
		case m.IsResponse():
			c.mu.Lock()
			ch, ok := c.viewWaiters[*m.ID]
			if !ok {
				ch = c.toolWaiters[*m.ID]
			}
			c.mu.Unlock()
			if ch != nil {
				select {
				case ch <- m:
				default:
				}
			}
		case m.IsRequest():
			_ = c.write(ctx, encoded(jsonrpc.NewError(*m.ID, jsonrpc.CodeMethodNotFound, "method not found")))
		}
	}
}

func (c *Conn) pinger(ctx context.Context) {
	t := time.NewTicker(PingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, PingTimeout)
			err := c.ws.Ping(pctx)
			cancel()
			if err != nil {
				c.close(websocket.StatusGoingAway, "ping timeout")
				return
			}
		}
	}
}

// close ends the connection with code; waiters get errConnClosed. The close frame goes
// out first: cancelling the connection's context first would end the pending read, and
// with it the connection, before the frame left — and a worker would not learn, from a
// close it never got, that its session ended. Close bounds its own handshake.
func (c *Conn) close(code websocket.StatusCode, reason string) {
	_ = c.ws.Close(code, reason)
	c.cancel()
}

// publish sends a status event when the status changed since the last one.
func (c *Conn) publish(ctx context.Context, st session.Status) {
	c.mu.Lock()
	changed := c.status != st
	c.status = st
	c.mu.Unlock()
	if changed && c.hub.cfg.Events != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		c.hub.cfg.Events.Publish(ctx, session.Event{AgentID: c.session.AgentID, SessionID: c.session.ID, Status: st, At: c.hub.cfg.Now()})
	}
}
