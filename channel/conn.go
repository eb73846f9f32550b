package channel

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/wire"
)

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

	// pingAt is when the hub pings the worker next (UnixNano); 0 until the hello.
	pingAt atomic.Int64

	nextID   atomic.Uint64
	relaying atomic.Int32 // view waiters in use
	tooling  atomic.Int32 // tool waiters in use
	// relays paces the view requests relayed to the worker (RelayBurst,
	// RelayRate) on the hub's RelayClock; it is safe for concurrent use.
	relays *rate.Limiter
	// relayed are the last request ids this connection relayed, so that a replayed
	// request is refused (onView).
	relayed relayRing

	mu sync.Mutex
	// Two waiter maps, so that views never share a bound or a table with tool
	// routing: viewWaiters holds at most MaxRelayWaiters, toolWaiters at most
	// MaxToolWaiters (the counters above reserve the slots).
	viewWaiters map[uint64]chan *jsonrpc.Message // guarded by mu
	toolWaiters map[uint64]chan *jsonrpc.Message // guarded by mu
	status      session.Status                   // last published; guarded by mu
	subs        []*nats.Subscription             // guarded by mu
}

// errConnClosed is returned to waiters of a connection that ended.
var errConnClosed = errors.New("channel: connection closed")

func (h *Hub) serve(parent context.Context, ws *websocket.Conn, sess session.Session) {
	h.serving.Add(1)
	defer h.serving.Add(-1) // last: after the socket closed
	ctx, cancel := context.WithCancel(parent)
	c := &Conn{
		hub: h, ws: ws, session: sess, ctx: ctx, cancel: cancel,
		log:         h.cfg.Log.With().Str("session", sess.ID).Logger(),
		viewWaiters: map[uint64]chan *jsonrpc.Message{},
		toolWaiters: map[uint64]chan *jsonrpc.Message{},
		helloed:     make(chan struct{}),
		relays:      rate.NewLimiter(RelayRate, RelayBurst),
	}
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
	res, _ := json.Marshal(jsonrpc.HelloResult{SessionID: sess.ID})
	if err := c.write(ctx, encoded(jsonrpc.NewResult(helloID, res))); err != nil {
		return
	}
	close(c.helloed)
	c.log.Info().Str("image", hello.ImageTag).Strs("features", hello.Features).Msg("worker attached")
	c.publish(ctx, h.cfg.Sessions.Status(c.current(ctx)))

	h.schedulePing(c, time.Now().Add(h.cfg.PingInterval).UnixNano()) // the hub's pingLoop
	if err := c.readLoop(ctx); websocket.CloseStatus(err) == StatusSessionEnded {
		// The worker's own end-of-session close: the one way a worker stops its session.
		sctx := context.WithoutCancel(ctx)
		h.stop(sctx, c, c.current(sctx), "worker ended")
	}
}

// call sends a request on the socket and waits for its response until ctx ends.
func (c *Conn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := c.nextID.Add(1)
	ch := make(chan *jsonrpc.Message, 1)
	waiters := c.toolWaiters
	if method == jsonrpc.MethodView {
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
		data, err := jsonrpc.ReadMessageScratch(ctx, c.ws)
		if err != nil {
			return err
		}
		m, err := jsonrpc.Parse(*data)
		wire.Release(data) // Parse copied what it keeps
		if err != nil {
			c.hub.invalid.Add(1)
			c.hub.peerLog.Warn().Str("session", c.session.ID).Uint64("invalid", c.hub.invalid.Load()).Msg("invalid message from worker")
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
			_ = c.write(ctx, encoded(jsonrpc.NewError(*m.ID, wire.RPCMethodNotFound, "method not found")))
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

// drop ends the connection without the close handshake, for a worker that no longer
// answers; waiters get errConnClosed.
func (c *Conn) drop() {
	_ = c.ws.CloseNow()
	c.cancel()
}
