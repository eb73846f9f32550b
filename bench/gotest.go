package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// goBenchRuns are the testing.B benchmarks the bench runs, by package and pattern:
// the envelope (seal and open of a 100 KB page), the grant script and the gate, the
// requester's decode of a reply and of a page against encoding/json's (jsonDecoders);
// the broker's masks painted in the DCT domain against a decode, paint and encode (its
// other benchmarks need Chromium and are the suites above); a frame's audit event,
// acknowledged by a JetStream stream and queued best effort.
var goBenchRuns = []struct{ pkg, pattern string }{
	{"./view/", "."}, {"./wire/", "^BenchmarkDecodePage$"}, {"./envelope/", "."}, {"./broker/jpegmask/", "^BenchmarkPaintMasks$"},
	{"./audit/", "^BenchmarkFrame$"},
}

// goBench is one line of `go test -bench` output.
type goBench struct {
	Package     string  `json:"package"`
	Name        string  `json:"name"`
	Iterations  int     `json:"iterations"`
	NsPerOp     float64 `json:"nsPerOp"`
	MBPerSec    float64 `json:"mbPerSec,omitempty"`
	BytesPerOp  int     `json:"bytesPerOp"`
	AllocsPerOp int     `json:"allocsPerOp"`
}

// runGoBenchmarks runs the packages' benchmarks (no tests) in root with benchtime and
// parses their results.
// goBenchCommands says what runGoBenchmarks runs, for the progress line and the report.
func goBenchCommands() string {
	var parts []string
	for _, run := range goBenchRuns {
		parts = append(parts, fmt.Sprintf("`-bench '%s' %s`", run.pattern, run.pkg))
	}
	return strings.Join(parts, ", ")
}

func runGoBenchmarks(ctx context.Context, root, benchtime string) ([]goBench, error) {
	var res []goBench
	for _, run := range goBenchRuns {
		args := []string{"test", "-run", "^$", "-bench", run.pattern, "-benchmem", "-count", "1", "-benchtime", benchtime, run.pkg}
		cmd := exec.CommandContext(ctx, "go", args...) //nolint:gosec // constant arguments but the benchtime of the bench's own options
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
		}
		got := parseGoBench(out)
		if len(got) == 0 {
			return nil, fmt.Errorf("go test -bench %s printed no benchmark:\n%s", run.pkg, out)
		}
		res = append(res, got...)
	}
	return res, nil
}

// parseGoBench reads the benchmark lines of `go test -bench -benchmem` output.
func parseGoBench(out []byte) []goBench {
	var res []goBench
	pkg := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimPrefix(p, "github.com/agentfy/agentfy/")
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		b := goBench{Package: pkg, Name: f[0]}
		if i := strings.LastIndexByte(b.Name, '-'); i > 0 {
			b.Name = b.Name[:i] // the GOMAXPROCS suffix
		}
		b.Iterations, _ = strconv.Atoi(f[1])
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				b.NsPerOp = v
			case "MB/s":
				b.MBPerSec = v
			case "B/op":
				b.BytesPerOp = int(v)
			case "allocs/op":
				b.AllocsPerOp = int(v)
			}
		}
		res = append(res, b)
	}
	return res
}
