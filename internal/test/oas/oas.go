// Package oas validates real HTTP responses against the repository's OpenAPI document
// (kin-openapi's openapi3filter): status, headers and body bytes. Tests use it on every
// response of the view routes.
package oas

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/agentfy/agentfy/openapi"
)

// Validator checks responses against the document.
type Validator struct {
	router routers.Router
}

// New loads and validates the public routes' document.
func New(ctx context.Context) (*Validator, error) { return NewFor(ctx, openapi.Document) }

// NewAdmin loads and validates the admin API's document.
func NewAdmin(ctx context.Context) (*Validator, error) { return NewFor(ctx, openapi.AdminDocument) }

// NewFor loads and validates a document.
func NewFor(ctx context.Context, document []byte) (*Validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(document)
	if err != nil {
		return nil, fmt.Errorf("oas: load: %w", err)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("oas: document invalid: %w", err)
	}
	// Match any host: tests run on random loopback ports.
	doc.Servers = nil
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("oas: router: %w", err)
	}
	return &Validator{router: r}, nil
}

// Validate checks one response (its body already read) of req.
func (v *Validator) Validate(ctx context.Context, req *http.Request, status int, header http.Header, body []byte) error {
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("oas: no route for %s %s: %w", req.Method, req.URL.Path, err)
	}
	opts := &openapi3filter.Options{
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true,
		MultiError:            true,
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts},
		Status:                 status,
		Header:                 header,
		Options:                opts,
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, in); err != nil {
		return fmt.Errorf("oas: %d response of %s does not conform: %w", status, req.URL.Path, err)
	}
	return nil
}

// Call sends a request to a replica as a client would and returns its status, headers
// and body. It fails tb on a transport error, and reports (without stopping the test)
// a /v1 answer without Cache-Control: no-store and a view-route answer that does not
// conform to the document (the view routes and GET /v1/agents).
func (v *Validator) Call(ctx context.Context, tb testing.TB, method, url, bearer string, body io.Reader) (int, http.Header, []byte) {
	tb.Helper()
	req, status, header, b := Send(ctx, tb, method, url, bearer, body)
	if strings.Contains(req.URL.Path, "/v1/") && header.Get("Cache-Control") != "no-store" {
		tb.Errorf("%s %s: Cache-Control %q, want no-store", method, req.URL.Path, header.Get("Cache-Control"))
	}
	if strings.HasSuffix(req.URL.Path, "/worker/view") || req.URL.Path == "/v1/agents" {
		if err := v.Validate(ctx, req, status, header, b); err != nil {
			tb.Errorf("%v\nbody: %.300s", err, b)
		}
	}
	return status, header, b
}

// Send sends a request as Call does (bearer, JSON body) and returns the request and the
// answer's status, headers and body, checking nothing. It fails tb on a transport error.
func Send(ctx context.Context, tb testing.TB, method, url, bearer string, body io.Reader) (*http.Request, int, http.Header, []byte) {
	tb.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		tb.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return req, resp.StatusCode, resp.Header, b
}
