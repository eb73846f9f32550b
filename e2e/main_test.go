// Package e2e tests both view routes end to end on a real stack: two API replicas on
// their own listeners, one embedded NATS server, one redis-server, and per session a real
// worker and a real broker with Chromium.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/oas"
	"github.com/agentfy/agentfy/internal/test/stacktest"
)

var (
	st     *stack.Stack
	client *stacktest.Client // on st; each test context lasts a minute
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	validator, err := oas.New(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	level := zerolog.WarnLevel
	if os.Getenv("AGENTFY_TEST_LOG") != "" {
		level = zerolog.DebugLevel
	}
	// AGENTFY_TEST_REDIS=cluster or sentinel runs the suite on that Redis topology.
	// JetStream keeps the audit trail in a stream, as a platform does (audit_test.go).
	jsDir, err := os.MkdirTemp("", "agentfy-e2e-jetstream-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(jsDir) }()
	st, err = stacktest.StartShared(ctx, stack.Options{Log: zerolog.New(os.Stderr).Level(level).With().Timestamp().Logger(), JetStreamDir: jsDir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start stack:", err)
		return 1
	}
	defer st.Close()
	client = &stacktest.Client{St: st, Validator: validator, Timeout: time.Minute}
	return m.Run()
}
