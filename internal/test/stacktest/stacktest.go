// Package stacktest is the upper layer of the project's one test harness (the lower is
// internal/test/testenv): it drives a running stack (internal/dev/stack) for the api, e2e and
// reliability suites — test contexts, tokens, agents, the gate, and requests to the
// view, status and consume routes whose every answer is checked against the OpenAPI
// document. Start gives a test a stack of its own (StartShared a TestMain, for a suite
// that shares one and wraps it in a Client), on the Redis topology AGENTFY_TEST_REDIS
// names; StartSession a session on it, skipped under -short when its broker launches
// Chromium.
package stacktest

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/oas"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/wire"
)

// DefaultTimeout is the deadline of a Client's test contexts when Client.Timeout is 0.
const DefaultTimeout = 2 * time.Minute

// TokenTTL is the lifetime of the tokens Token mints: longer than any test.
const TokenTTL = time.Hour

// Client is a test's way into a running stack: it mints tokens, adds agents, opens the
// gate and sends requests as a client of the API would. One Client may serve many
// tests at once.
type Client struct {
	// St is the stack the client talks to.
	St *stack.Stack
	// Validator, when set, checks every answer of Do, Get, Poll and Consume: Cache-Control:
	// no-store under /v1, and the OpenAPI document for the view routes and GET /v1/agents
	// (oas.Validator.Call). A nonconforming answer fails the test without stopping it.
	Validator *oas.Validator
	// Timeout is the deadline of each context Context returns; 0 means DefaultTimeout.
	Timeout time.Duration

	agents atomic.Int64 // fresh agent ids handed out
}

// Context returns a context that ends after c.Timeout or when the test ends.
func (c *Client) Context(tb testing.TB) context.Context {
	tb.Helper()
	d := c.Timeout
	if d == 0 {
		d = DefaultTimeout
	}
	// Not tb.Context: tests also call this from their cleanups, when that one has ended.
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// Token mints a development JWT for user, valid for TokenTTL.
func (c *Client) Token(tb testing.TB, user string) string {
	tb.Helper()
	tok, err := c.St.Token(user, TokenTTL)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// NewAgent adds a production agent of team-atlas and org-acme to the directory and
// returns its id. An empty id means a fresh one (agent-t001, agent-t002, …), so the test
// has a gate window of its own.
func (c *Client) NewAgent(tb testing.TB, id string) string {
	tb.Helper()
	return c.NewAgentIn(tb, id, "production")
}

// NewAgentIn is NewAgent for an agent of environment env.
func (c *Client) NewAgentIn(tb testing.TB, id, env string) string {
	tb.Helper()
	if id == "" {
		id = fmt.Sprintf("agent-t%03d", c.agents.Add(1))
	}
	agent := directory.Agent{ID: id, Name: id, TeamID: "team-atlas", OrgID: "org-acme", Environment: env}
	if err := c.St.Dir.Load(c.Context(tb), directory.Seed{Agents: []directory.Agent{agent}}); err != nil {
		tb.Fatal(err)
	}
	return id
}

// OpenGate clears an agent's gate window and paces (stack.Stack.OpenGate), so the test
// may view again at once. Only tests about the gate itself keep it.
func (c *Client) OpenGate(tb testing.TB, agent string) {
	tb.Helper()
	if err := c.St.OpenGate(c.Context(tb), agent); err != nil {
		tb.Fatal(err)
	}
}

// ViewPath is the members' view route of agent: /v1/agents/:id/worker/view.
func ViewPath(agent string) string { return "/v1/agents/" + agent + "/worker/view" }

// PartnerViewPath is the partners' view route of agent of org:
// /v1/orgs/:orgId/agents/:id/worker/view.
func PartnerViewPath(org, agent string) string {
	return "/v1/orgs/" + org + "/agents/" + agent + "/worker/view"
}

// StatusPath is the status feed route of agent: /v1/agents/:id/worker/status.
func StatusPath(agent string) string { return "/v1/agents/" + agent + "/worker/status" }

// ViewURL is ViewPath on replica number replica (0 is replica A).
func (c *Client) ViewURL(replica int, agent string) string {
	return c.St.Replicas[replica].URL + ViewPath(agent)
}

// PartnerViewURL is PartnerViewPath on replica number replica.
func (c *Client) PartnerViewURL(replica int, org, agent string) string {
	return c.St.Replicas[replica].URL + PartnerViewPath(org, agent)
}

// Do sends a request with bearer (none when empty) and a JSON body (none when nil),
// under a Context, and returns the whole answer. A transport error fails the test.
func (c *Client) Do(tb testing.TB, method, url, bearer string, body io.Reader) Response {
	tb.Helper()
	ctx := c.Context(tb)
	if c.Validator != nil {
		status, header, b := c.Validator.Call(ctx, tb, method, url, bearer, body)
		return Response{Status: status, Header: header, Body: string(b)}
	}
	return send(ctx, tb, method, url, bearer, body)
}

// Get is Do of GET base+path without a body.
func (c *Client) Get(tb testing.TB, base, path, bearer string) Response {
	tb.Helper()
	return c.Do(tb, http.MethodGet, base+path, bearer, nil)
}

// Poll asks replica A for agent's view as u-alice, as a client polling every 5 s would:
// the previous poll's gate window is over by then, which Poll stands for by clearing it.
func (c *Client) Poll(tb testing.TB, agent string) Response {
	tb.Helper()
	_ = c.St.OpenGate(c.Context(tb), agent) // fails only with Redis down, when no gate is kept
	return c.Do(tb, http.MethodGet, c.ViewURL(0, agent), c.Token(tb, "u-alice"), nil)
}

// ConsumeRequest is the body of a consume request for requestID.
func ConsumeRequest(requestID string) string { return `{"requestId":"` + requestID + `"}` }

// Consume posts body to replica A's consume route (wire.ConsumePath) with bearer, as a
// broker redeeming a view grant does.
func (c *Client) Consume(tb testing.TB, bearer, body string) Response {
	tb.Helper()
	return c.Do(tb, http.MethodPost, c.St.Replicas[0].URL+wire.ConsumePath, bearer, strings.NewReader(body))
}

// send is Do without a Validator: the request as oas.Validator.Call makes it, nothing
// checked.
func send(ctx context.Context, tb testing.TB, method, url, bearer string, body io.Reader) Response {
	tb.Helper()
	_, status, header, b := oas.Send(ctx, tb, method, url, bearer, body)
	return Response{Status: status, Header: header, Body: string(b)}
}

// Start is the way a test gets a stack of its own: it starts one (stack.Start) and
// stops it when the test ends. The stack logs to the test unless o.Log is set (any
// Logger but the zero one), and runs on the Redis topology AGENTFY_TEST_REDIS names
// (TopologyEnv: a redis-server of its own when unset) unless o.Redis points
// it at servers of the test's. Suites that share one stack start it in TestMain with
// StartShared.
func Start(tb testing.TB, o stack.Options) *Client {
	tb.Helper()
	if reflect.ValueOf(o.Log).IsZero() {
		o.Log = testenv.Logger(tb)
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	st, err := StartShared(ctx, o)
	if err != nil {
		tb.Fatalf("start stack: %v", err)
	}
	tb.Cleanup(st.Close)
	return &Client{St: st}
}

// StartShared is Start for a TestMain, which has no test to log to or to stop the
// stack with: the caller closes it. It starts on the Redis topology TopologyEnv names
// unless o.Redis is set.
func StartShared(ctx context.Context, o stack.Options) (*stack.Stack, error) {
	if o.Redis != nil {
		return stack.Start(ctx, o)
	}
	if o.Secrets == nil {
		s, err := deploy.GenerateSecrets()
		if err != nil {
			return nil, err
		}
		o.Secrets = &s
	}
	topo, err := TopologyFromEnv(ctx, cmp.Or(o.Deployment, "dev"), *o.Secrets)
	if err != nil {
		return nil, fmt.Errorf("start redis: %w", err)
	}
	if topo != nil {
		o.Redis = topo.Target
	}
	st, err := stack.Start(ctx, o)
	if err != nil {
		topo.Stop()
		return nil, err
	}
	st.OnClose(topo.Stop) // the last to stop
	return st, nil
}

// TopologyEnv names the Redis topology the integration suites run on: "" or "server"
// (one redis-server, the default), "cluster" (three masters, three replicas) or
// "sentinel" (a master, a replica, three sentinels). scripts/test.sh runs chosen
// suites on each.
const TopologyEnv = "AGENTFY_TEST_REDIS"

// TopologyFromEnv starts the topology TopologyEnv names (stack.StartTopology) for
// deployment with secrets; nil for the default, a stack's own redis-server.
func TopologyFromEnv(ctx context.Context, deployment string, secrets deploy.Secrets) (*stack.Topology, error) {
	return stack.StartTopology(ctx, os.Getenv(TopologyEnv), deployment, secrets)
}

// StartSession starts a session of agent on st within ctx (stack.Stack.StartSession)
// and closes it when the test ends. A session whose broker launches Chromium — neither
// Shell nor a BrokerHandler standing in for the broker — skips the test under -short
// (testenv.SkipUnderShort).
func StartSession(ctx context.Context, tb testing.TB, st *stack.Stack, agent string, o stack.SessionOptions) *stack.Session {
	tb.Helper()
	if !o.Shell && o.BrokerHandler == nil {
		testenv.SkipUnderShort(tb, "stacktest.StartSession", testenv.NeedsChromium)
	}
	ss, err := st.StartSession(ctx, agent, o)
	if err != nil {
		tb.Fatalf("start a session of %s: %v", agent, err)
	}
	tb.Cleanup(ss.Close)
	return ss
}
