package view

import (
	"encoding/json"

	"github.com/agentfy/agentfy/wire"
)

// Page is one frame of the agent's current tab: the wire contract's page (its limits,
// layout and validation live in package wire).
type Page = wire.Page

// Result is the body of both view routes: {"live":false}, {"live":true,"page":null} or
// {"live":true,"page":{…}}. It has no success wrapper.
type Result struct {
	Live bool
	Page *Page
}

// MarshalJSON writes the three shapes exactly: {"live":false}, {"live":true,"page":null}
// and {"live":true,"page":{…}}.
func (r Result) MarshalJSON() ([]byte, error) {
	if !r.Live {
		return []byte(`{"live":false}`), nil
	}
	return json.Marshal(struct {
		Live bool  `json:"live"`
		Page *Page `json:"page"`
	}{true, r.Page})
}
