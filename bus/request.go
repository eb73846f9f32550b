package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// Headers of Agentfy's own: those that carry an error reply, like nats.go's micro
// services do, and a view request's proof.
const (
	HeaderErrorCode        = "Agentfy-Error-Code"
	HeaderErrorDescription = "Agentfy-Error"
	// HeaderProof carries a view request's proof that a replica made it
	// (view.Grants.Proof); the owner relays no request without a valid one.
	HeaderProof = "Agentfy-Proof"
)

// Subscription limits: a subscriber that falls this far behind drops messages (and the
// requester times out) instead of growing without bound.
const (
	PendingMsgsLimit  = 1024
	PendingBytesLimit = 64 << 20 // 64 MiB
)

// Errors a requester branches on.
var (
	// ErrNoResponders means no process subscribes to the subject: no replica holds the
	// session's worker socket.
	ErrNoResponders = errors.New("bus: no responders")
	// ErrTimeout means the deadline passed before a reply arrived.
	ErrTimeout = errors.New("bus: request timed out")
)

// RemoteError is an error reply: the responder handled the request and failed with Code.
type RemoteError struct {
	Code        string
	Description string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("bus: remote error %s: %s", e.Code, e.Description)
}

// Request sends data to subject and waits for one reply until ctx ends. ctx must carry a
// deadline. The reply goes to a private random inbox of this connection. It returns
// ErrNoResponders, ErrTimeout, a *RemoteError for an error reply, or a transport error.
func Request(ctx context.Context, nc *nats.Conn, subject string, data []byte) ([]byte, error) {
	return RequestMsg(ctx, nc, &nats.Msg{Subject: subject, Data: data})
}

// RequestMsg is Request of a message with headers of its own (a view request's
// HeaderProof); the trace context is added to them.
func RequestMsg(ctx context.Context, nc *nats.Conn, req *nats.Msg) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("bus: request without a deadline")
	}
	injectTrace(ctx, req)
	msg, err := nc.RequestMsgWithContext(ctx, req)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, ErrNoResponders
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return nil, ErrTimeout
	case err != nil:
		return nil, fmt.Errorf("bus: request: %w", err)
	}
	if code := msg.Header.Get(HeaderErrorCode); code != "" {
		return nil, &RemoteError{Code: code, Description: msg.Header.Get(HeaderErrorDescription)}
	}
	return msg.Data, nil
}

// Client is a NATS connection as a requester sees it: Request, and whether a request can
// leave now. The view service takes one (view.Requester).
type Client struct{ conn *nats.Conn }

// NewClient returns nc as a Client.
func NewClient(nc *nats.Conn) Client { return Client{conn: nc} }

// Connected reports whether the connection is up: while it reconnects, a request would
// wait in the reconnect buffer until its deadline.
func (c Client) Connected() bool { return c.conn.IsConnected() }

// RequestMsg is RequestMsg on c's connection.
func (c Client) RequestMsg(ctx context.Context, msg *nats.Msg) ([]byte, error) {
	return RequestMsg(ctx, c.conn, msg)
}

// Publisher sends a message: a *nats.Conn, or a wrapper of one.
type Publisher interface {
	PublishMsg(m *nats.Msg) error
}

// Respond answers a request with data, sent on p: the connection the request arrived on
// (or a wrapper of it).
func Respond(p Publisher, msg *nats.Msg, data []byte) error {
	if msg.Reply == "" {
		return errors.New("bus: message has no reply subject")
	}
	return p.PublishMsg(&nats.Msg{Subject: msg.Reply, Data: data})
}

// RespondError answers a request, on p as Respond does, with an error code and a plain
// description (never an internal error text, which may hold details the requester must
// not see).
func RespondError(p Publisher, msg *nats.Msg, code, description string) error {
	if msg.Reply == "" {
		return errors.New("bus: message has no reply subject")
	}
	reply := nats.NewMsg(msg.Reply)
	reply.Header.Set(HeaderErrorCode, code)
	reply.Header.Set(HeaderErrorDescription, description)
	return p.PublishMsg(reply)
}

// Subscribe subscribes handler to subject with bounded pending limits. The handler runs
// on the subscription's goroutine: it must hand slow work off (to a bounded pool).
func Subscribe(nc *nats.Conn, subject string, handler nats.MsgHandler) (*nats.Subscription, error) {
	sub, err := nc.Subscribe(subject, handler)
	if err != nil {
		return nil, fmt.Errorf("bus: subscribe: %w", err)
	}
	if err := sub.SetPendingLimits(PendingMsgsLimit, PendingBytesLimit); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("bus: pending limits: %w", err)
	}
	return sub, nil
}
