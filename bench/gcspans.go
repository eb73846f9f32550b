package bench

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// nodeStarted is when this process started, as near as its code can tell: the Go
// runtime's collector trace (GODEBUG=gctrace=1, which the capacity bench sets for its
// nodes) dates each cycle from the program's start.
var nodeStarted = time.Now()

// gcTraceLine is one cycle of the collector's trace: its start after the program's, and
// the wall time of its three phases (the sweep termination's pause, the concurrent mark
// and scan, the mark termination's pause).
var gcTraceLine = regexp.MustCompile(`(?m)^gc \d+ @([0-9.]+)s [0-9]+%: ([0-9.]+)\+([0-9.]+)\+([0-9.]+) ms clock`)

// gcSpan is one collection, from its start to the end of its mark termination: the
// time when it took CPU from the program or made its allocations pay (assists).
type gcSpan struct{ start, end time.Time }

// gcSpans reads the collections of a process that started at started from its
// collector trace.
func gcSpans(trace string, started time.Time) []gcSpan {
	var out []gcSpan
	for _, m := range gcTraceLine.FindAllStringSubmatch(trace, -1) {
		at, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			continue
		}
		var clock float64
		for _, f := range m[2:] {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				clock = -1
				break
			}
			clock += v
		}
		if clock < 0 {
			continue
		}
		start := started.Add(time.Duration(at * float64(time.Second)))
		out = append(out, gcSpan{start: start, end: start.Add(time.Duration(clock * float64(time.Millisecond)))})
	}
	return out
}

// gcOverlap is how the frames of a window met the collections of a group of processes.
type gcOverlap struct {
	// Busy is the share of the window during which at least one of the processes was
	// collecting.
	Busy float64 `json:"busy"`
	// Cycles is the collections that overlapped the window.
	Cycles int `json:"cycles"`
	// Frames is the frames of the window, Met those whose request overlapped a
	// collection, and SlowestMet those of the slowest 1 % that did (of Slowest).
	Frames     int `json:"frames"`
	Met        int `json:"met"`
	Slowest    int `json:"slowest"`
	SlowestMet int `json:"slowestMet"`
	// P99Met and P99Clear are the p99 latency of the frames that met a collection and
	// of those that did not.
	P99Met   time.Duration `json:"p99Met"`
	P99Clear time.Duration `json:"p99Clear"`
}

// frameSpan is one frame's request, from when it was fired to its decoded body.
type frameSpan struct {
	fired   time.Time
	latency time.Duration
}

// overlapGC sets the frames of the window [from, to) against spans.
func overlapGC(frames []frameSpan, spans []gcSpan, from, to time.Time) gcOverlap {
	var o gcOverlap
	var in []gcSpan
	for _, s := range spans {
		if s.end.After(from) && s.start.Before(to) {
			in = append(in, s)
		}
	}
	slices.SortFunc(in, func(a, b gcSpan) int { return a.start.Compare(b.start) })
	o.Cycles = len(in)
	// The union of the spans within the window.
	var busy time.Duration
	var cur gcSpan
	for i, s := range in {
		s.start, s.end = maxTime(s.start, from), minTime(s.end, to)
		switch {
		case i == 0:
			cur = s
		case !s.start.After(cur.end):
			cur.end = maxTime(cur.end, s.end)
		default:
			busy += cur.end.Sub(cur.start)
			cur = s
		}
	}
	if len(in) > 0 {
		busy += cur.end.Sub(cur.start)
	}
	if to.After(from) {
		o.Busy = float64(busy) / float64(to.Sub(from))
	}
	met := func(f frameSpan) bool {
		end := f.fired.Add(f.latency)
		for _, s := range in {
			if s.start.Before(end) && s.end.After(f.fired) {
				return true
			}
		}
		return false
	}
	o.Frames = len(frames)
	sorted := slices.Clone(frames)
	slices.SortFunc(sorted, func(a, b frameSpan) int { return int(b.latency - a.latency) })
	o.Slowest = (len(sorted) + 99) / 100
	var metLat, clearLat []time.Duration
	for i, f := range sorted {
		if met(f) {
			o.Met++
			metLat = append(metLat, f.latency)
			if i < o.Slowest {
				o.SlowestMet++
			}
		} else {
			clearLat = append(clearLat, f.latency)
		}
	}
	o.P99Met, o.P99Clear = summarize(metLat).P99, summarize(clearLat).P99
	return o
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// withGCTrace is env with the collector's trace turned on (GODEBUG gctrace=1), the
// rest of GODEBUG kept.
func withGCTrace(env []string) []string {
	out := make([]string, 0, len(env)+1)
	debug := "gctrace=1"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			if v != "" {
				debug = v + ",gctrace=1"
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, "GODEBUG="+debug)
}

// gcTraceLines matches whole lines of the collector's trace.
var gcTraceLines = regexp.MustCompile(`(?m)^gc \d+ @.*\n?`)

// withoutGCTrace is a node's standard error without its collector's trace.
func withoutGCTrace(s string) string {
	return gcTraceLines.ReplaceAllString(s, "")
}
