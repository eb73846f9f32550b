package wire

import "github.com/go-json-experiment/json"

// DecodeStrict decodes b — one JSON value, nothing after it but space — into v: no
// member v does not name, no member twice, names matched exactly as written, strings of
// valid UTF-8. It is how every body that crosses between Agentfy's own processes is
// read: a JSON-RPC message and its params, a sealed reply and the page or tool call in
// it, a NATS status event, the broker's and the consume route's bodies, the admin API's
// bodies, and the records other processes wrote to Redis (a grant, a session's hello
// and activity, a directory record). Documents of other parties are not: the identity
// provider's JWK set and discovery document are read with encoding/json on purpose
// (auth/jwks.go), since they carry members Agentfy does not name and RFC 7517 asks
// that what is not understood be ignored.
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
