package view

import (
	"encoding/json"
	"io"

	"github.com/agentfy/agentfy/wire"
)

// Result is the body of both view routes: {"live":false}, {"live":true,"page":null} or
// {"live":true,"page":{…}}. It has no success wrapper. The page is the wire contract's
// (its limits, layout and validation live in package wire).
type Result struct {
	Live bool
	Page *wire.Page

	// Seen is what the view learnt on its way, for the audit trail (package audit);
	// it is never rendered.
	Seen Seen
}

// Seen is what a view learnt of the agent and its session: the agent's record when a
// check read it (its team and organisation), and the session it asked. View fills it
// also when it returns an error, as far as it got.
type Seen struct {
	Team, Organisation string
	Session            string
}

// MarshalJSON writes the three shapes exactly: {"live":false}, {"live":true,"page":null}
// and {"live":true,"page":{…}}.
func (r Result) MarshalJSON() ([]byte, error) {
	if !r.Live {
		return []byte(`{"live":false}`), nil
	}
	return json.Marshal(r.body())
}

// WriteJSON writes what MarshalJSON returns and a newline to w in one Write, encoded in
// encoding/json's pooled buffer rather than in a copy of its own: the body of a frame is
// some tens of kilobytes, every five seconds for every viewer.
func (r Result) WriteJSON(w io.Writer) error {
	if !r.Live {
		_, err := io.WriteString(w, `{"live":false}`+"\n")
		return err
	}
	return json.NewEncoder(w).Encode(r.body())
}

// liveBody is the body of a live agent's view.
type liveBody struct {
	Live bool       `json:"live"`
	Page *wire.Page `json:"page"`
}

func (r Result) body() liveBody { return liveBody{true, r.Page} }
