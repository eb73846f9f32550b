package channel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/coder/websocket"

	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/wire"
)

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
	p, why := helloParams(m.Params)
	if why != "" {
		_ = c.write(ctx, encoded(jsonrpc.NewError(*m.ID, wire.RPCInvalidParams, "hello: "+why)))
		return session.Hello{}, 0, errors.New(why)
	}
	return session.Hello{ImageTag: p.ImageTag, BootstrapRevision: p.BootstrapRevision, Features: p.Features}, *m.ID, nil
}

// helloParams reads a hello's params with wire.DecodeStrict, like the message around
// them (a member twice, in another case or unknown is refused), and checks them
// (jsonrpc.ValidHello). why says which rule a refused hello broke; "" for a good one.
func helloParams(raw json.RawMessage) (p jsonrpc.HelloParams, why string) {
	if err := wire.DecodeStrict(raw, &p); err != nil {
		return p, "hello params are not an object"
	}
	return p, jsonrpc.ValidHello(p)
}
