package stacktest

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agentfy/agentfy/internal/test/oas"
)

// adminDoc is the admin API's document, loaded once for every Client.
var adminDoc = sync.OnceValues(func() (*oas.Validator, error) {
	return oas.NewAdmin(context.Background()) // parses embedded bytes: nothing to wait for
})

// Admin sends an admin API request to replica number replica's admin listener with the
// stack's admin key and a JSON body (none when empty), and checks the answer against
// the admin API's document and the no-store rule (a nonconforming answer fails the test
// without stopping it).
func (c *Client) Admin(tb testing.TB, replica int, method, path, body string) Response {
	tb.Helper()
	return c.AdminAs(tb, replica, c.St.AdminKey, method, path, body)
}

// AdminAs is Admin with another bearer credential (none when empty).
func (c *Client) AdminAs(tb testing.TB, replica int, bearer, method, path, body string) Response {
	tb.Helper()
	v, err := adminDoc()
	if err != nil {
		tb.Fatal(err)
	}
	ctx := c.Context(tb)
	url := c.St.Replicas[replica].AdminURL + path
	var rd *strings.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	var req *http.Request
	var status int
	var header http.Header
	var b []byte
	if rd != nil {
		req, status, header, b = oas.Send(ctx, tb, method, url, bearer, rd)
	} else {
		req, status, header, b = oas.Send(ctx, tb, method, url, bearer, nil)
	}
	if header.Get("Cache-Control") != "no-store" {
		tb.Errorf("%s %s: Cache-Control %q, want no-store", method, path, header.Get("Cache-Control"))
	}
	if err := v.Validate(ctx, req, status, header, b); err != nil {
		tb.Errorf("%v\nbody: %.300s", err, b)
	}
	return Response{Status: status, Header: header, Body: string(b)}
}
