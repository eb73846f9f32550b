// Command agentfy-bench measures the system on this machine (bench/): a view end to
// end against the bare capture, privacy masks, routing, answers under load, the
// footprint, the Go benchmarks and the capacity suite, each against a baseline
// measured in the same run; it prints the table and writes BENCHMARKS.md. Like
// agentfy-dev it links the embedded NATS server, the worker and the broker, so no
// production image ships it.
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
)

const usage = `agentfy-bench — the benchmarks of Agentfy browser view

Usage:
  agentfy-bench [-out BENCHMARKS.md] [-quick] [-json FILE]   measure the stack and print a table
                [-cpuprofile FILE] [-capacity [-levels N,…]] (-capacity: the capacity suite
                [-chromium BIN] [-v]                         alone, into the report's section 7)

Run it from the repository: go run ./cmd/agentfy-bench -h lists every flag.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentfy-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	switch {
	case len(args) > 0 && (args[0] == "help" || args[0] == "--help"):
		fmt.Fprint(stdout, usage)
		return nil
	case len(args) > 0 && args[0] == "node":
		// A process of the capacity bench, which starts it; not for people.
		return runNode(ctx, args[1:], stdout)
	}
	return runBench(ctx, args, stdout)
}
