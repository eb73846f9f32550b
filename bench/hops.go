package bench

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// cpuPart is one part of a replica's work in a CPU profile: a name and the pattern of
// the stack frames that make a sample the part's. A sample is the first part's whose
// pattern one of its frames matches.
type cpuPart struct {
	name    string
	pattern *regexp.Regexp
}

// replicaParts are the parts of the replicas' CPU, in the order a sample is tried.
var replicaParts = []cpuPart{
	{"the collector (its workers and the assists of allocating goroutines)", regexp.MustCompile(`^runtime\.(gcBgMarkWorker|gcAssistAlloc|bgsweep|bgscavenge|markroot|gcStart|gcMarkDone|gcMarkTermination)`)},
	{"the scheduler finding work and the network poller, between goroutines", regexp.MustCompile(`^runtime\.(schedule|findRunnable|mcall|park_m|goschedImpl|netpoll)$`)},
	{"idle: session checks and pings (net of the idle rate in the figures)", regexp.MustCompile(`channel\.\(\*Hub\)\.(Run|check|duePings)|channel\.\(\*Conn\)\.ping`)},
	{"requester: the view route (checks, gate, NATS request, decryption, answer)", regexp.MustCompile(`api\.\(\*Server\)\.(traceView|agentView|renderView)|view\.\(\*Service\)\.View`)},
	{"consume route (the broker's redemption)", regexp.MustCompile(`api\.\(\*Server\)\.(traceConsume|consume)$`)},
	{"owner: the relay (the request from NATS, the worker's socket, the reply)", regexp.MustCompile(`channel\.\(\*Conn\)\.(onView|readLoop|call|write)|channel\.\(\*Hub\)\.(serve|startDispatchers)`)},
	{"NATS client (its reader and flusher)", regexp.MustCompile(`nats-io/nats(\.|%2e)go`)},
	{"HTTP server (connections, reading requests, before the routes)", regexp.MustCompile(`^net/http\.\(\*conn\)\.serve$`)},
	{"Redis client (its pool and connections outside a route)", regexp.MustCompile(`redis/go-redis`)},
}

// otherPart names the samples no part claims.
const otherPart = "other (metrics, timers, runtime housekeeping)"

// cpuParts splits the CPU of profiles (one process's each) into parts: CPU time by
// part name, summed over the profiles, and the share of each part spent in system
// calls. What go tool pprof cannot read is left out.
func cpuParts(ctx context.Context, parts []cpuPart, files ...string) (cpu map[string]time.Duration, syscalls map[string]time.Duration) {
	cpu, syscalls = map[string]time.Duration{}, map[string]time.Duration{}
	for _, file := range files {
		out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-traces", file).Output() //nolint:gosec // go tool pprof on the bench's own profile
		if err != nil {
			continue
		}
		splitTraces(string(out), parts, cpu, syscalls)
	}
	return cpu, syscalls
}

// traceValue is the sample value that opens a stack in go tool pprof -traces.
var traceValue = regexp.MustCompile(`^\s*([0-9.]+)(ns|us|µs|ms|s)\s+(\S.*)$`)

// splitTraces adds the stacks of one -traces output to cpu and syscalls, by part.
func splitTraces(out string, parts []cpuPart, cpu, syscalls map[string]time.Duration) {
	for block := range strings.SplitSeq(out, "-----------+-------------------------------------------------------") {
		var (
			value  time.Duration
			frames []string
		)
		for line := range strings.Lines(block) {
			line = strings.TrimRight(line, "\n")
			if value == 0 {
				m := traceValue.FindStringSubmatch(line)
				if m == nil {
					continue
				}
				v, err := strconv.ParseFloat(m[1], 64)
				if err != nil {
					continue
				}
				unit := map[string]time.Duration{"ns": time.Nanosecond, "us": time.Microsecond, "µs": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[m[2]]
				value = time.Duration(v * float64(unit))
				line = m[3]
			}
			if f := strings.TrimSpace(line); f != "" {
				frames = append(frames, strings.TrimSuffix(f, " (inline)"))
			}
		}
		if value == 0 || len(frames) == 0 {
			continue
		}
		part := otherPart
	find:
		for _, p := range parts {
			for _, f := range frames {
				if p.pattern.MatchString(trimModule(f)) {
					part = p.name
					break find
				}
			}
		}
		cpu[part] += value
		if isSyscall(frames[0]) {
			syscalls[part] += value
		}
	}
}

// trimModule is a frame's function without its module path's host and owner
// (github.com/agentfy/agentfy/api.(*Server).consume is api.(*Server).consume), so that
// the parts' patterns name packages as the code does.
func trimModule(f string) string {
	if rest, ok := strings.CutPrefix(f, "github.com/agentfy/agentfy/"); ok {
		return rest
	}
	return f
}

// isSyscall reports whether a leaf frame is a system call or the runtime's wait in one.
func isSyscall(leaf string) bool {
	return strings.Contains(leaf, "syscall.Syscall") || strings.Contains(leaf, "syscall/linux.Syscall6") ||
		strings.HasPrefix(leaf, "runtime.futex") || strings.Contains(leaf, "EpollWait") ||
		strings.HasPrefix(leaf, "runtime.write1") || strings.HasPrefix(leaf, "runtime.usleep")
}
