package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/internal/bench"
	"github.com/agentfy/agentfy/internal/stack"
)

// cmdBench runs the benchmark suite (internal/bench) against a real local stack, prints
// the table and writes BENCHMARKS.md and, with -json, the raw results.
func cmdBench(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	out := fs.String("out", "", "write the report to this Markdown `file` (default BENCHMARKS.md at the repository root; - for none)")
	jsonOut := fs.String("json", "", "also write the raw results to this JSON `file`")
	quick := fs.Bool("quick", false, "small samples: a smoke run of every suite in well under a minute")
	chromium := fs.String("chromium", os.Getenv("AGENTFY_CHROMIUM"), "Chromium `binary` (default /usr/bin/chromium)")
	verbose := fs.Bool("v", false, "log the stack's warnings")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the end-to-end suite to this `file`, of the fast paths to file.fastpaths and of the CPU windows to file.footprint (go tool pprof)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected arguments %q", fs.Args())
	}
	level := zerolog.ErrorLevel
	if *verbose {
		level = zerolog.WarnLevel
	}
	progress := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "• "+format+"\n", a...) }
	if err := ensureInstalled(ctx, progress); err != nil {
		return err
	}
	root, err := stack.FindRoot()
	if err != nil {
		return err
	}
	if *out == "" {
		*out = filepath.Join(root, "BENCHMARKS.md")
	}

	res, err := bench.Run(ctx, bench.Options{
		Root: root, Quick: *quick, Chromium: *chromium, CPUProfile: *cpuProfile,
		Command:  strings.TrimSpace("go run ./cmd/agentfy-dev bench " + strings.Join(args, " ")),
		Log:      zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05"}).Level(level).With().Timestamp().Logger(),
		Progress: progress,
	})
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if _, err := io.WriteString(stdout, res.Markdown(false)); err != nil {
		return err
	}
	if *out != "-" {
		if err := writeFileAtomic(*out, []byte(res.Markdown(true))); err != nil {
			return err
		}
		progress("wrote %s", *out)
	}
	if *jsonOut != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := writeFileAtomic(*jsonOut, b); err != nil {
			return err
		}
	}
	return nil
}
