// Command agentfy-dev is the development CLI: it runs the whole local stack (dev.go),
// and is the compose stack's demo agent and demo site. The benchmarks are
// agentfy-bench's (cmd/agentfy-bench).
// It links the embedded NATS server, Chromium's driver, the worker and the broker, so
// no production image ships it; the operator's commands are cmd/agentfy's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentfy/agentfy/cmd/internal/operator"
)

const usage = `agentfy-dev — development CLI of Agentfy browser view

Usage:
  agentfy-dev dev [--ready-file f.json]                  run the whole local stack (installs what is missing)
  agentfy-dev demo [-agent ID] [-site URL]               the demo agent: browse the demo site in the agent's
                                                         sessions through tool calls (the compose stack)
  agentfy-dev site [-dir testdata/site] [-listen :8000]  serve the demo website
  agentfy-dev health URL                                 succeed when GET URL answers 200 (health checks)

demo takes the operator's configuration from the environment, as agentfy does (see
README.md). The operator's commands (seed, token, orgkey, session, tool, secrets, …)
are agentfy's: go run ./cmd/agentfy help. The benchmarks are agentfy-bench's:
go run ./cmd/agentfy-bench.
`

type command func(ctx context.Context, args []string, stdout io.Writer) error

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentfy-dev:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	commands := map[string]command{
		"dev":  cmdDev,
		"demo": cmdDemo,
		"site": cmdSite,
		"health": func(ctx context.Context, args []string, _ io.Writer) error {
			return operator.Health(ctx, args)
		},
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	c, ok := commands[args[0]]
	if !ok {
		return fmt.Errorf("unknown command %q (try: agentfy-dev help)", args[0])
	}
	return c(ctx, args[1:], stdout)
}
