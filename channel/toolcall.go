package channel

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/wire"
)

// A tool call carries the agent's URLs and typed text, and its result carries titles, so
// on NATS it travels sealed like a frame: the requester seals the call to the owner
// replica's key (published with the session in Redis) and sends its own one-time key;
// the owner seals the result to that key and from its own (envelope.SealFrom). A
// subscriber on the bus sees ciphertext only, and a result from anyone but the owner —
// another process holding a NATS credential answering first — does not open.

// toolRequest is the NATS payload of a tool call.
type toolRequest struct {
	RequestID string            `json:"requestId"`
	ReplyKey  string            `json:"replyKey"`
	Envelope  envelope.Envelope `json:"envelope"`
}

// ErrNoOwner means the session has no replica holding its worker (or an owner that does
// not publish a key).
var ErrNoOwner = errors.New("channel: no replica holds the session's worker")

// ErrToolReply is the one error for a tool result that does not open.
var ErrToolReply = errors.New("channel: tool result does not open")

// CallTool sends one tool call over NATS to the replica holding sess's worker and waits
// for its result until ctx ends (ctx must carry a deadline). The operator CLI and the
// demo agent use it. An error reply comes back as a *bus.RemoteError.
func CallTool(ctx context.Context, nc *nats.Conn, ns bus.Namespace, sess session.Session, name string, args any) (json.RawMessage, error) {
	if sess.Owner == "" || sess.OwnerKey == "" {
		return nil, ErrNoOwner
	}
	ownerKey, err := envelope.ParsePublicKey(sess.OwnerKey)
	if err != nil {
		return nil, ErrNoOwner
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	plain, err := json.Marshal(jsonrpc.ToolCallParams{Name: name, Arguments: raw})
	if err != nil {
		return nil, err
	}
	idb := make([]byte, 32)
	if _, err := rand.Read(idb); err != nil {
		return nil, err
	}
	requestID := hex.EncodeToString(idb)
	replyKey, err := envelope.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	env, err := envelope.SealToolCall(rand.Reader, ownerKey, requestID, plain)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(toolRequest{RequestID: requestID, ReplyKey: envelope.PublicKeyHex(replyKey), Envelope: env})
	if err != nil {
		return nil, err
	}
	subject, err := ns.Subject(bus.VerbTool, sess.ID)
	if err != nil {
		return nil, err
	}
	reply, err := bus.Request(ctx, nc, subject, body)
	if err != nil {
		return nil, err
	}
	return openToolReply(replyKey, ownerKey, requestID, reply)
}

// openToolReply opens the owner's sealed result of the tool call requestID: a body
// {"envelope":{…}} read with wire.DecodeStrict, sealed to replyKey from ownerKey. Any
// other body is ErrToolReply.
func openToolReply(replyKey *ecdh.PrivateKey, ownerKey *ecdh.PublicKey, requestID string, reply []byte) (json.RawMessage, error) {
	var sealed envelope.Sealed
	if err := wire.DecodeStrict(reply, &sealed); err != nil {
		return nil, ErrToolReply
	}
	// Only the owner replica, whose key the session store names, can have sealed it.
	res, err := envelope.OpenFrom(replyKey, ownerKey, requestID, sealed.Envelope)
	if err != nil {
		return nil, ErrToolReply
	}
	return res, nil
}

// openToolRequest opens a sealed tool call with the owner's key. The NATS payload and
// the call inside it are read with wire.DecodeStrict: a member twice, in another case or
// unknown is refused.
func openToolRequest(key *ecdh.PrivateKey, data []byte) (req toolRequest, p jsonrpc.ToolCallParams, reply *ecdh.PublicKey, err error) {
	if len(data) > MaxToolRequest || wire.DecodeStrict(data, &req) != nil {
		return req, p, nil, errors.New("malformed tool call")
	}
	plain, err := envelope.OpenToolCall(key, req.RequestID, req.Envelope)
	if err != nil {
		return req, p, nil, errors.New("tool call does not open")
	}
	if reply, err = envelope.ParsePublicKey(req.ReplyKey); err != nil {
		return req, p, nil, errors.New("bad reply key")
	}
	if err := wire.DecodeStrict(plain, &p); err != nil || p.Name == "" || len(p.Name) > 64 {
		return req, p, nil, fmt.Errorf("tool call must be {\"name\",\"arguments\"}")
	}
	return req, p, reply, nil
}

// onTool handles a sealed tool call routed over NATS: the one path that moves the
// session clock and appends to the activity log.
func (c *Conn) onTool(msg *nats.Msg) {
	req, p, replyKey, err := openToolRequest(c.hub.key, msg.Data)
	if err != nil {
		_ = bus.RespondError(c.hub.cfg.NATS, msg, "bad_request", err.Error())
		return
	}
	if c.tooling.Add(1) > MaxToolWaiters {
		c.tooling.Add(-1)
		_ = bus.RespondError(c.hub.cfg.NATS, msg, "busy", "too many tool calls on this connection")
		return
	}
	go func() {
		defer c.tooling.Add(-1)
		ctx, cancel := context.WithTimeout(c.ctx, ToolTimeout)
		defer cancel()
		res, err := c.call(ctx, jsonrpc.MethodToolsCall, p)
		now := c.hub.cfg.Now()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
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
				_ = bus.RespondError(c.hub.cfg.NATS, msg, "unavailable", "cannot seal the result")
				return
			}
			b, _ := json.Marshal(envelope.Sealed{Envelope: env})
			if err := bus.Respond(c.hub.cfg.NATS, msg, b); err != nil {
				c.log.Warn().Err(err).Int("bytes", len(b)).Msg("tool result not sent")
				_ = bus.RespondError(c.hub.cfg.NATS, msg, "unavailable", "result not sent")
			}
		case errors.As(err, &rpcErr):
			// Broker error messages are plain and carry no URL or page text.
			_ = bus.RespondError(c.hub.cfg.NATS, msg, "tool_failed", rpcErr.Message)
		case errors.Is(err, context.DeadlineExceeded):
			_ = bus.RespondError(c.hub.cfg.NATS, msg, "timeout", "tool call timed out")
		default:
			_ = bus.RespondError(c.hub.cfg.NATS, msg, "unavailable", "worker unavailable")
		}
	}()
}
