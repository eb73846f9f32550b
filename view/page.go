package view

import (
	"encoding/json"
	"strconv"

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

// MarshalJSON writes the three shapes exactly, in one pass: the frame's base64 (tens of
// KB) is copied as it is rather than scanned for characters to escape, which strict
// base64 never holds. A page's masked count follows data when there is one (more than
// 0, which is all ParsePage lets through), where json.Marshal writes it too.
func (r Result) MarshalJSON() ([]byte, error) {
	switch {
	case !r.Live:
		return []byte(`{"live":false}`), nil
	case r.Page == nil:
		return []byte(`{"live":true,"page":null}`), nil
	case !isBase64Text(r.Page.Data):
		return json.Marshal(struct {
			Live bool  `json:"live"`
			Page *Page `json:"page"`
		}{true, r.Page})
	}
	p := r.Page
	b := make([]byte, 0, len(p.Data)+len(p.URL)+len(p.Title)+160)
	b = append(b, `{"live":true,"page":{"url":`...)
	b = appendString(b, p.URL)
	b = append(b, `,"title":`...)
	b = appendString(b, p.Title)
	b = append(b, `,"capturedAt":`...)
	b = appendString(b, p.CapturedAt)
	b = append(b, `,"contentType":`...)
	b = appendString(b, p.ContentType)
	b = append(b, `,"data":"`...)
	b = append(b, p.Data...)
	b = append(b, '"')
	if p.Masked > 0 {
		b = append(b, `,"masked":`...)
		b = strconv.AppendInt(b, int64(p.Masked), 10)
	}
	return append(b, `}}`...), nil
}

// appendString appends s as a JSON string (short fields: URL, title, timestamp).
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// base64Text marks the characters of standard base64.
var base64Text = func() (t [256]bool) {
	for _, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=" {
		t[c] = true
	}
	return t
}()

// isBase64Text reports whether s holds only characters of standard base64.
func isBase64Text(s string) bool {
	ok := true
	for i := 0; i < len(s); i++ {
		ok = ok && base64Text[s[i]] // no branch per byte: one scan of a whole frame
	}
	return ok
}
