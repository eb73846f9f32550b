package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/bench"
	"github.com/agentfy/agentfy/internal/dev/stack"
)

// runBench runs the benchmark suite (bench/) against a real local stack, prints the
// table and writes BENCHMARKS.md and, with -json, the raw results.
func runBench(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	out := fs.String("out", "", "write the report to this Markdown `file` (default BENCHMARKS.md at the repository root; - for none)")
	jsonOut := fs.String("json", "", "also write the raw results to this JSON `file`")
	quick := fs.Bool("quick", false, "small samples: a smoke run of every suite in well under a minute")
	chromium := fs.String("chromium", os.Getenv("AGENTFY_CHROMIUM"), "Chromium `binary` (default /usr/bin/chromium)")
	verbose := fs.Bool("v", false, "log the stack's warnings")
	capacity := fs.Bool("capacity", false, "run the capacity suite alone and put its section in place of the report's section 7")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the end-to-end suite to this `file`, of its tracing comparison to file.tracing, of the fast paths to file.fastpaths, of the CPU windows to file.footprint and of the capacity ceiling's steps to file.capacity-N.PROCESS (go tool pprof)")
	levels := fs.String("levels", "", "with -capacity: the live sessions of each level, comma-separated and growing (default 100,1000,10000), without the ceiling search; prints the section and writes nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var capacityLevels []int
	if *levels != "" {
		if !*capacity {
			return errors.New("bench: -levels needs -capacity")
		}
		for _, f := range strings.Split(*levels, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || (len(capacityLevels) > 0 && n <= capacityLevels[len(capacityLevels)-1]) {
				return fmt.Errorf("bench: -levels %q: want growing positive counts, like 100,10000", *levels)
			}
			capacityLevels = append(capacityLevels, n)
		}
		*out = "-"
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected arguments %q", fs.Args())
	}
	level := zerolog.ErrorLevel
	if *verbose {
		level = zerolog.WarnLevel
	}
	progress := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "• "+format+"\n", a...) }
	if err := stack.EnsureInstalled(ctx, progress); err != nil {
		return err
	}
	root, err := stack.FindRoot()
	if err != nil {
		return err
	}
	if *out == "" {
		*out = filepath.Join(root, "BENCHMARKS.md")
	}

	self, err := os.Executable()
	if err != nil {
		return err
	}
	res, err := bench.Run(ctx, bench.Options{
		Root: root, Quick: *quick, Chromium: *chromium, CPUProfile: *cpuProfile,
		Self: []string{self, "node"}, CapacityOnly: *capacity, CapacityLevels: capacityLevels,
		Command:  strings.TrimSpace("go run ./cmd/agentfy-bench " + strings.Join(args, " ")),
		Log:      zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05"}).Level(level).With().Timestamp().Logger(),
		Progress: progress,
	})
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if *capacity {
		return writeCapacity(res, *out, stdout, progress)
	}
	if _, err := io.WriteString(stdout, res.Markdown(false)); err != nil {
		return err
	}
	if *out != "-" {
		if err := stack.WriteFileAtomic(*out, []byte(res.Markdown(true))); err != nil {
			return err
		}
		progress("wrote %s", *out)
	}
	if *jsonOut != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := stack.WriteFileAtomic(*jsonOut, b); err != nil {
			return err
		}
	}
	return nil
}

// writeCapacity prints the capacity section and puts it in place of out's section 7,
// keeping the sections before it as they were measured.
func writeCapacity(res *bench.Results, out string, stdout io.Writer, progress func(string, ...any)) error {
	section := res.CapacityMarkdown()
	if _, err := io.WriteString(stdout, section); err != nil {
		return err
	}
	if out == "-" {
		return nil
	}
	report, err := os.ReadFile(out) //nolint:gosec // the report the operator named
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := stack.WriteFileAtomic(out, []byte(bench.SpliceCapacity(string(report), section))); err != nil {
		return err
	}
	progress("wrote section 7 of %s", out)
	return nil
}

// runNode runs this process as a node of the capacity bench (bench.RunNode): a
// replica, a farm of workers or a NATS server, driven through stdin by the bench that
// started it (`agentfy-bench node ROLE`).
func runNode(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return errors.New("node: want one role (replica, farm or nats)")
	}
	return bench.RunNode(ctx, args[0], os.Stdin, stdout)
}
