package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/channel"
	"github.com/agentfy/agentfy/cmd/internal/conf"
	"github.com/agentfy/agentfy/cmd/internal/operator"
	"github.com/agentfy/agentfy/session"
)

// cmdTool sends one tool call to an agent's live session, routed over NATS to the
// replica that holds its worker — the same path an agent's own tool calls take, so it
// moves the session clock and appears in the activity log.
func cmdTool(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tool", flag.ContinueOnError)
	agent := fs.String("agent", "", "agent `id`")
	name := fs.String("name", "", "tool: browser_open, browser_play, browser_tabs or browser_close")
	rawArgs := fs.String("args", "{}", "tool arguments as a JSON object")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to wait for the result")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *agent == "" || *name == "" {
		return errors.New("tool: -agent and -name are required")
	}
	var argv map[string]any
	if err := json.Unmarshal([]byte(*rawArgs), &argv); err != nil {
		return fmt.Errorf("tool: -args must be a JSON object: %w", err)
	}
	st, err := operator.OpenStores(ctx)
	if err != nil {
		return err
	}
	defer operator.CloseRedis(st.RDB)
	sess, err := st.Sessions.Current(ctx, *agent)
	if errors.Is(err, session.ErrNoSession) {
		return fmt.Errorf("tool: agent %q has no live session", *agent)
	}
	if err != nil {
		return err
	}
	nc, ns, err := operator.Bus("agentfy-cli", conf.Logger("cli"))
	if err != nil {
		return err
	}
	defer nc.Close()
	cctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	res, err := channel.CallTool(cctx, nc, ns, sess, *name, argv)
	if errors.Is(err, bus.ErrNoResponders) || errors.Is(err, channel.ErrNoOwner) {
		return fmt.Errorf("tool: no replica holds session %s's worker (is the worker running?)", sess.ID)
	}
	if err != nil {
		return fmt.Errorf("tool: %w", err)
	}
	_, err = fmt.Fprintln(stdout, string(res))
	return err
}
