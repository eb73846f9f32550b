// Package e2e tests both view routes end to end on a real stack: two API replicas on
// their own listeners, one embedded NATS server, one redis-server, and per session a real
// worker and a real broker with Chromium.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/oas"
	"github.com/agentfy/agentfy/internal/stack"
	"github.com/agentfy/agentfy/view"
)

var (
	st        *stack.Stack
	validator *oas.Validator
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	if validator, err = oas.New(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	level := zerolog.WarnLevel
	if os.Getenv("AGENTFY_TEST_LOG") != "" {
		level = zerolog.DebugLevel
	}
	// AGENTFY_TEST_REDIS=cluster or sentinel runs the suite on that Redis topology.
	st, _, err = stack.StartOnTopology(ctx, stack.Options{Log: zerolog.New(os.Stderr).Level(level).With().Timestamp().Logger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start stack:", err)
		return 1
	}
	defer st.Close()
	return m.Run()
}

// agentSeq makes fresh agent ids, so each test has its own rate-gate window.
var agentSeq atomic.Int64

// newAgent adds an agent of team-atlas, org-acme, production (or env) and returns its id.
func newAgent(t *testing.T, env string) string {
	t.Helper()
	if env == "" {
		env = "production"
	}
	id := fmt.Sprintf("agent-t%03d", agentSeq.Add(1))
	err := st.Dir.Load(ctx(t), directory.Seed{Agents: []directory.Agent{{ID: id, Name: id, TeamID: "team-atlas", OrgID: "org-acme", Environment: env}}})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func token(t *testing.T, user string) string {
	t.Helper()
	tok, err := st.Token(user, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// response is a read response of a view route, validated against the OpenAPI document.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) result(t *testing.T) view.Result {
	t.Helper()
	var raw struct {
		Live *bool           `json:"live"`
		Page json.RawMessage `json:"page"`
	}
	if err := json.Unmarshal(r.Body, &raw); err != nil || raw.Live == nil {
		t.Fatalf("body %s is not a view result: %v", r.Body, err)
	}
	res := view.Result{Live: *raw.Live}
	if len(raw.Page) > 0 && string(raw.Page) != "null" {
		res.Page = &view.Page{}
		if err := json.Unmarshal(raw.Page, res.Page); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

// get requests a view route and checks what every response must satisfy: the OpenAPI
// document and Cache-Control: no-store.
func get(t *testing.T, base, path, bearer string) response {
	t.Helper()
	status, header, body := validator.Call(ctx(t), t, http.MethodGet, base+path, bearer, nil)
	return response{status, header, body}
}

func agentPath(agent string) string { return "/v1/agents/" + agent + "/worker/view" }
func partnerPath(org, agent string) string {
	return "/v1/orgs/" + org + "/agents/" + agent + "/worker/view"
}

// openGate clears an agent's rate window so a test can ask again at once. Only tests
// about the gate itself keep it.
func openGate(t *testing.T, agent string) {
	t.Helper()
	if err := st.OpenGate(ctx(t), agent); err != nil {
		t.Fatal(err)
	}
}

// decodeFrame checks a page's JPEG and returns it decoded.
func decodeFrame(t *testing.T, p *view.Page) image.Image {
	t.Helper()
	raw, err := base64Decode(p.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(raw, []byte{0xFF, 0xD8, 0xFF}) || !bytes.HasSuffix(raw, []byte{0xFF, 0xD9}) {
		t.Fatal("frame is not a complete JPEG")
	}
	img, err := jpeg.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return img
}
