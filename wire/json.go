package wire

import "github.com/go-json-experiment/json"

// DecodeStrict decodes b — one JSON value, nothing after it but space — into v, the way
// every body that crosses from another process is read (a JSON-RPC message, a sealed
// reply, a page): no member v does not name, no member twice, names matched exactly
// as written, strings of valid UTF-8.
//
// These are the semantics of encoding/json/v2, here from the module the standard
// library's v2 comes from (github.com/go-json-experiment/json, kept by the Go team;
// encoding/json/v2 is still behind GOEXPERIMENT in Go 1.26). Its decoder also reads a
// view's 48 KB of base64 about six times faster than encoding/json's scanner, as fast
// as the hand-written one-pass scanners it replaced (BENCHMARKS.md section 6), so each
// body has one parser and no fast path.
func DecodeStrict(b []byte, v any) error {
	return json.Unmarshal(b, v, json.RejectUnknownMembers(true))
}
