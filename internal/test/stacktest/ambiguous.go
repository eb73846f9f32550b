package stacktest

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentfy/agentfy/internal/test/oas"
	"github.com/agentfy/agentfy/wire"
)

// Ambiguous is one request that could be read two ways: its path as written (an
// encoded slash stays in it) and its Authorization headers, one per bearer. The public
// and the admin listener refuse it alike (answer.RefuseAmbiguous).
type Ambiguous struct {
	Name, Method, Path string
	Bearers            []string
	ContentType, Body  string
}

// Answered is what a server answered an Ambiguous request.
type Answered struct {
	Req    *http.Request
	Status int
	Header http.Header
	Body   []byte
}

// Send sends r to base and returns the answer, its body read.
func (r Ambiguous) Send(ctx context.Context, tb testing.TB, base string) Answered {
	tb.Helper()
	req, err := http.NewRequestWithContext(ctx, r.Method, base+r.Path, strings.NewReader(r.Body))
	if err != nil {
		tb.Fatal(err)
	}
	for _, b := range r.Bearers {
		req.Header.Add("Authorization", "Bearer "+b)
	}
	if r.ContentType != "" {
		req.Header.Set("Content-Type", r.ContentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		tb.Fatal(err)
	}
	return Answered{Req: req, Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// WantRefused checks that an ambiguous request was answered 400 with no-store and the
// error body (wire.ErrorBody, exactly), and, when v is set, that the answer conforms to
// v's document.
func WantRefused(ctx context.Context, tb testing.TB, v *oas.Validator, r Ambiguous, a Answered) {
	tb.Helper()
	if a.Status != http.StatusBadRequest {
		tb.Fatalf("%s %s: status %d, want 400: %.300s", r.Method, r.Path, a.Status, a.Body)
	}
	if cc := a.Header.Get("Cache-Control"); cc != "no-store" {
		tb.Errorf("Cache-Control %q, want no-store", cc)
	}
	var eb wire.ErrorBody
	if err := wire.DecodeStrict(a.Body, &eb); err != nil || eb.Error.Code != "bad_request" || eb.Error.Message == "" {
		tb.Errorf("body %.300q is not the error body of a bad request (%v)", a.Body, err)
	}
	if v != nil {
		if err := v.Validate(ctx, a.Req, a.Status, a.Header, a.Body); err != nil {
			tb.Errorf("%v\nbody: %.300s", err, a.Body)
		}
	}
}
