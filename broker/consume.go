package broker

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/wire"
)

// MaxConsumeURLs bounds the API base URLs a ConsumeClient tries in turn.
const MaxConsumeURLs = 16

// ConsumeClient redeems capture request ids at the API with the broker
// pass, and learns the public key to seal the capture to. It knows one or
// more base URLs of the API (the replicas themselves, or a load balancer) and
// tries them in turn: a replica that cannot be reached or answers 5xx passes
// the redemption on to the next one, within the caller's deadline. Any other
// answer is final, because a request id can be redeemed only once. The pass
// goes only to the configured URLs: redirects are not followed.
type ConsumeClient struct {
	client    *http.Client
	endpoints []string // the consume route of each base URL, in the configured order
	pass      string

	// first is the index of the endpoint tried first: the last one that answered,
	// so that a replica that is down costs a failed attempt once, not per view.
	first atomic.Uint32
}

// NewConsumeClient returns a client for the API at baseURL (any replica, or a
// load balancer), authenticating with the broker pass. It is
// NewFailoverConsumeClient with one URL.
func NewConsumeClient(client *http.Client, baseURL, pass string) (*ConsumeClient, error) {
	return NewFailoverConsumeClient(client, []string{baseURL}, pass)
}

// NewFailoverConsumeClient returns a client that redeems at the API replicas
// of baseURLs, tried in turn, authenticating with the broker pass. It copies
// client and turns off its redirects. It rejects an empty list, more than
// MaxConsumeURLs URLs, a URL that is not absolute http(s), and an empty pass;
// its errors never show a URL or the pass.
func NewFailoverConsumeClient(client *http.Client, baseURLs []string, pass string) (*ConsumeClient, error) {
	switch {
	case len(baseURLs) == 0:
		return nil, errors.New("consume client: no API URL")
	case len(baseURLs) > MaxConsumeURLs:
		return nil, fmt.Errorf("consume client: more than %d API URLs", MaxConsumeURLs)
	}
	endpoints := make([]string, len(baseURLs))
	for i, base := range baseURLs {
		u, err := url.Parse(base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("consume client: API URL %d of %d must be an absolute http or https URL", i+1, len(baseURLs))
		}
		endpoints[i] = u.JoinPath(wire.ConsumePath).String()
	}
	if pass == "" {
		return nil, errors.New("consume client: empty broker pass")
	}
	if client == nil {
		client = http.DefaultClient
	}
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &ConsumeClient{client: &c, endpoints: endpoints, pass: pass}, nil
}

// ConsumeTransport wraps rt, the transport of a ConsumeClient's http.Client, so that
// each consume call gets a client span (telemetry.SpanConsume) whose context its
// traceparent header carries to the replica (whose consume route's span joins the
// view's trace). It returns rt itself when tp is nil (tracing off).
func ConsumeTransport(tp trace.TracerProvider, rt http.RoundTripper) http.RoundTripper {
	return telemetry.Transport(tp, rt, telemetry.SpanConsume)
}

// errNextReplica marks an attempt whose replica did not redeem the request id
// and may have left it for another: a transport error (including the
// attempt's share of the deadline running out) or a 5xx answer.
var errNextReplica = errors.New("replica unavailable")

// Consume redeems requestID and returns the public key to seal to. It starts
// with the replica that answered last and moves on to the next after a
// transport error or a 5xx answer; each attempt gets an equal share of what is
// left of ctx's deadline, so a replica that never answers leaves time for the
// others. Every failure wraps ErrGrantRefused: every replica unavailable,
// a status other than 200 and 5xx (final: the id is not tried elsewhere), a
// body that is not exactly {"publicKey":"<130 hex>"} (no other member, none
// twice, the name in its case), or a key off the curve.
func (c *ConsumeClient) Consume(ctx context.Context, requestID string) (*ecdh.PublicKey, error) {
	body, err := json.Marshal(struct {
		RequestID string `json:"requestId"`
	}{requestID})
	if err != nil {
		return nil, fmt.Errorf("consume grant: %w: %w", ErrGrantRefused, err)
	}
	n := len(c.endpoints)
	first := int(c.first.Load()) % n
	var last error
	for i := range n {
		if i > 0 && ctx.Err() != nil {
			break
		}
		at := (first + i) % n
		actx, cancel := attemptContext(ctx, n-i)
		key, err := c.consumeAt(actx, c.endpoints[at], body)
		cancel()
		if !errors.Is(err, errNextReplica) {
			c.first.Store(uint32(at)) //nolint:gosec // at < MaxConsumeURLs
			if err != nil {
				return nil, fmt.Errorf("consume grant: %w: %w", ErrGrantRefused, err)
			}
			return key, nil
		}
		last = fmt.Errorf("API URL %d of %d: %w", at+1, n, err)
	}
	return nil, fmt.Errorf("consume grant: %w: no replica redeemed it: %w", ErrGrantRefused, last)
}

// attemptContext bounds one of left remaining attempts to an equal share of
// the time ctx has left; the last attempt, and any attempt without a
// deadline, gets all of it. A fast failure leaves its unused share to the
// attempts after it.
func attemptContext(ctx context.Context, left int) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok || left <= 1 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Until(deadline)/time.Duration(left))
}

// consumeAt makes one redemption attempt at endpoint. Its error wraps
// errNextReplica when another replica may still redeem the id.
func (c *ConsumeClient) consumeAt(ctx context.Context, endpoint string, body []byte) (*ecdh.PublicKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.pass)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		// Keep the endpoint out of the error, and so out of the logs.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return nil, fmt.Errorf("%w: %w", errNextReplica, err)
	}
	defer resp.Body.Close()
	// Read at most one byte more than allowed to detect an oversized body,
	// and drain what is left so the connection can be reused.
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxConsumeResponseBytes+1))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxConsumeResponseBytes))
	switch {
	case resp.StatusCode >= http.StatusInternalServerError:
		return nil, fmt.Errorf("%w: status %d", errNextReplica, resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if len(data) > MaxConsumeResponseBytes {
		return nil, errors.New("answer too large")
	}
	// Read strictly (wire.DecodeStrict): a publicKey given twice or in another case is
	// refused, never one of them chosen.
	var answer struct {
		PublicKey string `json:"publicKey"`
	}
	if err := wire.DecodeStrict(data, &answer); err != nil {
		return nil, errors.New("malformed answer")
	}
	key, err := envelope.ParsePublicKey(answer.PublicKey)
	if err != nil {
		return nil, errors.New("malformed public key")
	}
	return key, nil
}
