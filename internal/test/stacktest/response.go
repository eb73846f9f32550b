package stacktest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

// Response is a whole answer of the API.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

// Result decodes the body as a view result ({"live":…,"page":…}); a body without live
// fails the test.
func (r Response) Result(tb testing.TB) view.Result {
	tb.Helper()
	var raw struct {
		Live *bool           `json:"live"`
		Page json.RawMessage `json:"page"`
	}
	if err := json.Unmarshal([]byte(r.Body), &raw); err != nil || raw.Live == nil {
		tb.Fatalf("body %s is not a view result: %v", r.Body, err)
	}
	res := view.Result{Live: *raw.Live}
	if len(raw.Page) > 0 && string(raw.Page) != "null" {
		res.Page = &wire.Page{}
		if err := json.Unmarshal(raw.Page, res.Page); err != nil {
			tb.Fatal(err)
		}
	}
	return res
}

// Summary describes a view answer without any page content, for reports and failure
// messages: "200 frame", "200 {"live":false}", "429 Retry-After: 2", "503".
func (r Response) Summary() string {
	switch {
	case r.Status == http.StatusOK && strings.HasPrefix(r.Body, `{"live":true,"page":{`):
		return "200 frame"
	case r.Status == http.StatusOK:
		return "200 " + strings.TrimSpace(r.Body)
	case r.Status == http.StatusTooManyRequests:
		return "429 Retry-After: " + r.Header.Get("Retry-After")
	default:
		return fmt.Sprint(r.Status)
	}
}
