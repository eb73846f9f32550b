package main

import (
	"context"
	"errors"
	"io"
)

// cmdBench runs the benchmark suite against a real local stack and prints a table
// (see BENCHMARKS.md).
func cmdBench(ctx context.Context, args []string, stdout io.Writer) error {
	return errors.New("bench: not built yet")
}
