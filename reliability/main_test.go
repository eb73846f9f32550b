// Package reliability breaks the real stack — two replicas, workers, brokers with
// Chromium, Redis and NATS — and checks that every failure gives the status SPEC §3
// names, recovers by the next poll, leaks nothing, and stays within its bounds. It
// writes its results as a table: AGENTFY_RELIABILITY_REPORT=RELIABILITY.md go test ./reliability
package reliability

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/oas"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

var (
	idp    *provider // the platform's identity provider, as a JWK set the suite controls
	st     *stack.Stack
	client *stacktest.Client   // on st
	logs   = &testenv.Buffer{} // every log line of every in-process component
	cliBin string              // the operator CLI, cmd/agentfy
	report = &recorder{}
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root, err := stack.FindRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir, err := os.MkdirTemp("", "agentfy-reliability-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(binDir) }()
	brokerBin := filepath.Join(binDir, "agentfy-broker")
	cliBin = filepath.Join(binDir, "agentfy")
	build := exec.CommandContext(ctx, "go", "build", "-o", binDir+"/", "./cmd/agentfy-broker", "./cmd/agentfy")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the broker and the CLI: %v\n%s", err, out)
		return 1
	}
	validator, err := oas.New(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if idp, err = startProvider(); err != nil {
		fmt.Fprintln(os.Stderr, "start the identity provider:", err)
		return 1
	}
	defer idp.srv.Close()
	defer idp.other.Close()
	// AGENTFY_TEST_REDIS=cluster or sentinel runs the suite on that Redis topology.
	st, err = stacktest.StartShared(ctx, stack.Options{
		PersistRedis: true, BrokerBin: brokerBin, ExtraJWT: []auth.JWTConfig{idp.config()},
		Log: zerolog.New(logs).Level(zerolog.DebugLevel).With().Timestamp().Logger(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start stack:", err)
		return 1
	}
	client = &stacktest.Client{St: st, Validator: validator}
	code := m.Run()
	st.Close()
	// The table is of a whole run: under -short the cases that need Chromium skip, and
	// a skipped case is no pass.
	if path := os.Getenv("AGENTFY_RELIABILITY_REPORT"); path != "" && code == 0 && testing.Short() {
		fmt.Fprintln(os.Stderr, "AGENTFY_RELIABILITY_REPORT: no table under -short (its Chromium cases skip); run without -short")
	} else if path != "" && code == 0 {
		if !filepath.IsAbs(path) {
			path = filepath.Join(root, path)
		}
		if err := os.WriteFile(path, report.markdown(), 0o644); err != nil { //nolint:gosec // a report for people
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if code != 0 && os.Getenv("AGENTFY_TEST_LOG") != "" {
		fmt.Fprintln(os.Stderr, logs.String())
	}
	return code
}

// recorder collects one row per case for RELIABILITY.md.
type recorder struct {
	mu       sync.Mutex
	rows     []row
	places   int            // places given so far: record calls and reserved ones
	reserved map[string]int // a case's place by its test name, given by reserve
}

type row struct {
	area, name, expected, observed, rerun string
	failed, skipped                       bool
	// seq is the row's place: the order record was called in, or the place reserve
	// gave a case that runs side by side with others.
	seq int
}

// record adds a row for the current test; its verdict is read when the test ends.
func record(t *testing.T, area, expected string, observed *string) {
	t.Helper()
	name := t.Name()
	report.mu.Lock()
	seq, ok := report.reserved[name]
	if !ok {
		seq = report.places
		report.places++
	}
	report.mu.Unlock()
	t.Cleanup(func() {
		report.mu.Lock()
		defer report.mu.Unlock()
		report.rows = append(report.rows, row{
			area: area, name: name, expected: expected, observed: *observed, failed: t.Failed(), skipped: t.Skipped(), seq: seq,
			rerun: fmt.Sprintf("`go test ./reliability -run '^%s$'`", strings.ReplaceAll(strings.SplitN(name, "/", 2)[0], "'", "")),
		})
	})
}

// reserve gives the rows of t's cases named names (subtests that will run side by side,
// in any order) their places now, in the order given.
func reserve(t *testing.T, names ...string) {
	report.mu.Lock()
	defer report.mu.Unlock()
	if report.reserved == nil {
		report.reserved = map[string]int{}
	}
	for _, n := range names {
		report.reserved[t.Name()+"/"+n] = report.places
		report.places++
	}
}

func (r *recorder) markdown() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Reliability\n\nWritten by the suite itself (`reliability/`) on %s: two API replicas, workers, brokers with Debian's Chromium, a real redis-server and an embedded NATS server, broken for real. Rerun everything with\n\n    AGENTFY_RELIABILITY_REPORT=RELIABILITY.md go test -count=1 ./reliability\n\n", time.Now().UTC().Format("2006-01-02"))
	// One section per area, in the order areas first appear; rows keep their places
	// (record's calls, reserve's) within it (tests of one area may run apart, a Faults test
	// among the Access ones; cases side by side end in any order).
	rows := slices.Clone(r.rows)
	slices.SortFunc(rows, func(a, b row) int { return a.seq - b.seq })
	first := map[string]int{}
	for i, rw := range rows {
		if _, ok := first[rw.area]; !ok {
			first[rw.area] = i
		}
	}
	slices.SortStableFunc(rows, func(a, b row) int { return first[a.area] - first[b.area] })
	area := ""
	for _, rw := range rows {
		if rw.area != area {
			area = rw.area
			fmt.Fprintf(&b, "\n## %s\n\n| case | expected | observed | result | how to rerun |\n|---|---|---|---|---|\n", area)
		}
		verdict := "pass"
		switch {
		case rw.failed:
			verdict = "**FAIL**"
		case rw.skipped:
			verdict = "**skipped**"
		}
		name := rw.name
		if i := strings.Index(name, "/"); i >= 0 {
			name = strings.ReplaceAll(name[i+1:], "_", " ")
		} else {
			name = words(strings.TrimPrefix(name, "Test"))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", esc(name), esc(rw.expected), esc(rw.observed), verdict, rw.rerun)
	}
	return b.Bytes()
}

// words turns a CamelCase test name into lowercase words.
func words(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return strings.ToLower(b.String())
}

func esc(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }
