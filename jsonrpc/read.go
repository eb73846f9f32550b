package jsonrpc

import (
	"context"

	"github.com/coder/websocket"

	"github.com/agentfy/agentfy/wire"
)

// ReadMessage reads the next message of the tool channel: websocket.Conn.Read with
// wire.ReadAll, one copy of exactly the message where Read's io.ReadAll allocates about
// three times a 48 KB sealed frame. The connection's read limit bounds it.
func ReadMessage(ctx context.Context, ws *websocket.Conn) ([]byte, error) {
	_, r, err := ws.Reader(ctx)
	if err != nil {
		return nil, err
	}
	return wire.ReadAll(r)
}

// ReadMessageScratch is ReadMessage into a buffer wire.Scratch lends, for a reader that
// parses the message at once (Parse copies out what it keeps) and gives the buffer back
// with wire.Release: the owner's relay reads a 48 KB sealed frame per view.
func ReadMessageScratch(ctx context.Context, ws *websocket.Conn) (*[]byte, error) {
	_, r, err := ws.Reader(ctx)
	if err != nil {
		return nil, err
	}
	return wire.ReadScratch(r)
}
