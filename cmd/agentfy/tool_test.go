package main

import (
	"bytes"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// TestToolCommandGoesThroughTheOwner runs `agentfy tool` against a stack whose worker is
// attached to the second replica; the broker here is a stand-in answering browser_tabs.
func TestToolCommandGoesThroughTheOwner(t *testing.T) {
	ctx := testenv.Context(t, 2*time.Minute)
	// On the Redis topology AGENTFY_TEST_REDIS names (a redis-server by default).
	st := stacktest.Start(t, stack.Options{Root: "../..", Log: zerolog.New(os.Stderr).Level(zerolog.WarnLevel)}).St
	var calls atomic.Int32
	fake := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != "/tools/browser_tabs" {
			http.Error(w, `{"error":{"code":"not_found","message":"no"}}`, http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(`{"result":{"tabs":[]}}`))
	})
	ss := stacktest.StartSession(ctx, t, st, "agent-scout", stack.SessionOptions{Replica: 1, BrokerHandler: fake})
	// The operator's credentials, as `agentfy-dev dev` prints them.
	for _, kv := range st.RedisEnv(deploy.RedisOperator) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("AGENTFY_NATS_URL", st.NATS.ClientURL())
	t.Setenv("AGENTFY_NATS_PASSWORD", st.Secrets.NATS[bus.RoleOperator])
	t.Setenv("AGENTFY_DEPLOYMENT", "dev")
	t.Setenv("AGENTFY_LOG_LEVEL", "error")

	var out bytes.Buffer
	if err := run(ctx, []string{"tool", "-agent", "agent-scout", "-name", "browser_tabs"}, &out); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out.String()) != `{"tabs":[]}` || calls.Load() != 1 {
		t.Fatalf("output %q after %d broker calls", out.String(), calls.Load())
	}
	log, err := st.Sess.ActivityLog(ctx, ss.ID)
	if err != nil || len(log) != 1 || log[0].Tool != "browser_tabs" || !log[0].OK {
		t.Fatalf("activity log %+v %v", log, err)
	}
	for _, args := range [][]string{
		{"tool", "-agent", "agent-ledger", "-name", "browser_tabs"}, // no live session
		{"tool", "-agent", "agent-scout", "-name", "browser_tabs", "-args", "[1]"},
		{"tool", "-agent", "agent-scout"},
	} {
		if err := run(ctx, args, &out); err == nil {
			t.Errorf("agentfy %s succeeded", strings.Join(args, " "))
		}
	}
	// Without the NATS credential the CLI cannot even connect, and nothing reaches
	// the broker.
	t.Setenv("AGENTFY_NATS_PASSWORD", "")
	before := calls.Load()
	if err := run(ctx, []string{"tool", "-agent", "agent-scout", "-name", "browser_tabs"}, &out); err == nil || !strings.Contains(err.Error(), "uthorization") {
		t.Errorf("tool without a NATS credential: %v", err)
	}
	if calls.Load() != before {
		t.Error("a tool call without a NATS credential reached the broker")
	}
}
