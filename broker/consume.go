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

	"github.com/agentfy/agentfy/view/envelope"
	"github.com/agentfy/agentfy/wire"
)

// ConsumePath is the API route that redeems an observation request id.
const ConsumePath = wire.ConsumePath

// ConsumeClient redeems observation request ids at the API with the broker
// pass, and learns the public key to seal the observation to. The pass goes
// only to the configured URL: redirects are not followed.
type ConsumeClient struct {
	client   *http.Client
	endpoint string
	pass     string
}

// NewConsumeClient returns a client for the API at baseURL (any replica),
// authenticating with the broker pass. It copies client and turns off its
// redirects. It rejects a base URL that is not absolute http(s) and an empty
// pass.
func NewConsumeClient(client *http.Client, baseURL, pass string) (*ConsumeClient, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("consume client: the API URL must be an absolute http or https URL")
	}
	if pass == "" {
		return nil, errors.New("consume client: empty broker pass")
	}
	if client == nil {
		client = http.DefaultClient
	}
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &ConsumeClient{client: &c, endpoint: u.JoinPath(ConsumePath).String(), pass: pass}, nil
}

// Consume redeems requestID and returns the public key to seal to. Every
// failure wraps ErrCapabilityRefused: a transport error, a status other than
// 200, a body that is not {"publicKey":"<130 hex>"}, or a key off the curve.
func (c *ConsumeClient) Consume(ctx context.Context, requestID string) (*ecdh.PublicKey, error) {
	body, err := json.Marshal(struct {
		RequestID string `json:"requestId"`
	}{requestID})
	if err != nil {
		return nil, fmt.Errorf("consume capability: %w: %w", ErrCapabilityRefused, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("consume capability: %w: %w", ErrCapabilityRefused, err)
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
		return nil, fmt.Errorf("consume capability: %w: %w", ErrCapabilityRefused, err)
	}
	defer resp.Body.Close()
	// Read at most one byte more than allowed to detect an oversized body,
	// and drain what is left so the connection can be reused.
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxConsumeResponseBytes+1))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxConsumeResponseBytes))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("consume capability: %w: status %d", ErrCapabilityRefused, resp.StatusCode)
	}
	if err != nil {
		return nil, fmt.Errorf("consume capability: %w: read: %w", ErrCapabilityRefused, err)
	}
	if len(data) > MaxConsumeResponseBytes {
		return nil, fmt.Errorf("consume capability: %w: answer too large", ErrCapabilityRefused)
	}
	var answer struct {
		PublicKey string `json:"publicKey"`
	}
	if err := json.Unmarshal(data, &answer); err != nil {
		return nil, fmt.Errorf("consume capability: %w: malformed answer", ErrCapabilityRefused)
	}
	key, err := envelope.ParsePublicKey(answer.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("consume capability: %w: malformed public key", ErrCapabilityRefused)
	}
	return key, nil
}
