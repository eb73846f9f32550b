package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/bus"
)

// Limits of a verification.
const (
	// verifyMaxBoots bounds the boots one verification keeps apart: a deployment's
	// replicas start a few times a day, so more in one window is a forgery or a window
	// to narrow.
	verifyMaxBoots = 100_000
	// verifyMaxReported bounds the problems printed one by one (the rest are counted)
	// and the repeated numbers kept apart.
	verifyMaxReported = 1000
)

const verifyHelp = `Reads every event the stream received in the window, views and admin changes, and checks
each boot's sequence (a publisher's events are numbered 1, 2, 3… from its start, never
reused): a number missing is an event lost (a gap), a number read twice an event repeated.
Within a boot, only the numbers between the smallest and the largest read in the window can
be judged: the window may begin after the boot's first event, and events after its last may
still be on their way or lost with no later one to show it. It also flags an admin event
whose body names another source than its subject, an event whose body disagrees with its
subject or its message id, and events that cannot be read. It prints what it read and each
problem, and exits 1 on any.`

// cmdAuditVerify checks the trail of a window for gaps and repeats.
func cmdAuditVerify(ctx context.Context, args []string, stdout io.Writer) error {
	fs, since := trailFlags("verify", "verify [-since DURATION]", verifyHelp)
	start, err := parseTrailFlags(fs, args, since)
	if err != nil {
		return err
	}
	t, err := openTrail(bus.RoleAudit)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Name(), err)
	}
	defer t.close()
	v := newVerifier(t.ns)
	if err := t.read(ctx, []string{t.ns.AuditWildcard()}, start, v.add); err != nil {
		return fmt.Errorf("%s: %w", fs.Name(), err)
	}
	out := bufio.NewWriter(stdout)
	n := v.report(out, start)
	if err := out.Flush(); err != nil {
		return fmt.Errorf("%s: %w", fs.Name(), err)
	}
	if n > 0 {
		return fmt.Errorf("%s: %s (above)", fs.Name(), plural(n, "problem"))
	}
	return nil
}

// verifier gathers what a verification reads.
type verifier struct {
	ns        bus.Namespace
	boots     map[string]*bootTrail
	order     []string // the boots, in the order their first event was read
	events    int
	decisions int64
	problems  []string // at most verifyMaxReported, in the order found
	more      int      // problems found beyond those
	repeats   int      // repeated numbers kept apart, at most verifyMaxReported
}

// bootTrail is what was read of one boot's sequence.
type bootTrail struct {
	replica string
	seqs    seqSet
	events  int
	repeats map[uint64]int // a number read more than once → how many times
}

func newVerifier(ns bus.Namespace) *verifier {
	return &verifier{ns: ns, boots: map[string]*bootTrail{}}
}

// originOf is the part of an event that verify reads: its origin, and an admin
// event's source and action, or a view event's agent.
type originOf struct {
	audit.Origin
	Source string `json:"source"`
	Action string `json:"action"`
	Agent  string `json:"agent"`
}

// problem records one problem, printed in full for the first verifyMaxReported.
func (v *verifier) problem(format string, args ...any) {
	if len(v.problems) < verifyMaxReported {
		v.problems = append(v.problems, fmt.Sprintf(format, args...))
		return
	}
	v.more++
}

// add reads one event of the stream.
func (v *verifier) add(m jetstream.Msg, md *jetstream.MsgMetadata) error {
	at := fmt.Sprintf("event %d on %s", md.Sequence.Stream, m.Subject())
	v.events++
	var e originOf
	if err := decodeEvent(m, &e); err != nil {
		v.problem("unreadable: %s: %v", at, err)
		return nil
	}
	if agent, ok := viewAgent(v.ns, m.Subject()); ok {
		if agent != bus.AuditNoAgent && e.Agent != agent {
			v.problem("subject: %s names agent %q", at, e.Agent)
		}
	} else if source, action, ok := adminSubject(v.ns, m.Subject()); ok {
		switch {
		case source == "":
			v.problem("source: %s: no source publishes there", at)
		case e.Source != source:
			v.problem("source: %s (%s) says source %q", at, source, e.Source)
		}
		if e.Action != action {
			v.problem("subject: %s says action %q", at, e.Action)
		}
	} else {
		v.problem("subject: %s is neither a view's nor an admin change's", at)
	}
	if e.Boot == "" || e.Seq == 0 || e.Count < 1 {
		v.problem("origin: %s has boot %q, seq %d, count %d", at, e.Boot, e.Seq, e.Count)
		return nil
	}
	if id := m.Headers().Get(jetstream.MsgIDHeader); id != e.MsgID() {
		v.problem("message id: %s has Nats-Msg-Id %q, its origin says %q", at, id, e.MsgID())
	}
	v.decisions += int64(e.Count)
	b := v.boots[e.Boot]
	if b == nil {
		if len(v.boots) >= verifyMaxBoots {
			return fmt.Errorf("more than %d boots in the window: narrow -since", verifyMaxBoots)
		}
		b = &bootTrail{replica: e.Replica}
		v.boots[e.Boot] = b
		v.order = append(v.order, e.Boot)
	}
	if e.Replica != b.replica {
		v.problem("replica: %s: boot %s is replica %q's, the event says %q", at, e.Boot, b.replica, e.Replica)
	}
	b.events++
	if !b.seqs.add(e.Seq) {
		switch {
		case b.repeats[e.Seq] > 0:
			b.repeats[e.Seq]++
		case v.repeats < verifyMaxReported:
			if b.repeats == nil {
				b.repeats = map[uint64]int{}
			}
			b.repeats[e.Seq] = 2
			v.repeats++
		default:
			v.problem("repeat: replica %s boot %s seq %d read again", b.replica, e.Boot, e.Seq)
		}
	}
	return nil
}

// report prints what was read and every problem; it returns how many problems.
func (v *verifier) report(w io.Writer, start time.Time) int {
	replicas := map[string]bool{}
	for _, b := range v.boots {
		replicas[b.replica] = true
	}
	fmt.Fprintf(w, "read %s (%s) of %s of %s since %s\n", plural(v.events, "event"), plural(v.decisions, "decision"),
		plural(len(v.boots), "boot"), plural(len(replicas), "replica"), start.UTC().Format(time.RFC3339))
	boots := slices.Clone(v.order)
	slices.SortStableFunc(boots, func(a, b string) int { return strings.Compare(v.boots[a].replica, v.boots[b].replica) })
	var gaps, missing, repeats uint64
	var found []string
	for _, id := range boots {
		b := v.boots[id]
		lo, hi := b.seqs.bounds()
		fmt.Fprintf(w, "boot %s of replica %s: seq %d to %d judged, %s\n", id, b.replica, lo, hi, plural(b.events, "event"))
		b.seqs.gaps(func(from, to uint64) {
			gaps++
			missing += to - from + 1
			if from == to {
				found = append(found, fmt.Sprintf("gap: replica %s boot %s: seq %d missing", b.replica, id, from))
			} else {
				found = append(found, fmt.Sprintf("gap: replica %s boot %s: seq %d to %d missing (%d events)", b.replica, id, from, to, to-from+1))
			}
		})
		seqs := make([]uint64, 0, len(b.repeats))
		for s := range b.repeats {
			seqs = append(seqs, s)
		}
		slices.Sort(seqs)
		for _, s := range seqs {
			repeats++
			found = append(found, fmt.Sprintf("repeat: replica %s boot %s: seq %d read %d times", b.replica, id, s, b.repeats[s]))
		}
	}
	n := len(found) + len(v.problems) + v.more
	shown := 0
	for _, p := range append(found, v.problems...) {
		if shown == verifyMaxReported {
			break
		}
		fmt.Fprintln(w, p)
		shown++
	}
	if shown < n {
		fmt.Fprintf(w, "… and %d more problems\n", n-shown)
	}
	if n == 0 {
		fmt.Fprintln(w, "no gap, no repeat: every boot's sequence is whole in the window")
		return 0
	}
	fmt.Fprintf(w, "%s (%s missing), %s, %s\n", plural(gaps, "gap"), plural(missing, "event"),
		plural(repeats, "repeated number"), plural(len(v.problems)+v.more, "other problem"))
	return n
}

// seqSet is a set of sequence numbers kept as sorted, disjoint, non-adjacent runs: a
// boot's events arrive nearly in order, so a whole boot is a few runs, and the spaces
// between runs are its gaps.
type seqSet struct{ runs []seqRun }

type seqRun struct{ lo, hi uint64 }

// add puts n (at least 1) in the set; false when it was there already.
func (s *seqSet) add(n uint64) bool {
	// The first run that ends at n-1 or later: n is in it, extends it, or comes
	// before it.
	i := sort.Search(len(s.runs), func(i int) bool { return s.runs[i].hi+1 >= n })
	if i < len(s.runs) {
		r := &s.runs[i]
		switch {
		case r.lo <= n && n <= r.hi:
			return false
		case r.hi+1 == n:
			r.hi = n
			if i+1 < len(s.runs) && s.runs[i+1].lo == n+1 {
				r.hi = s.runs[i+1].hi
				s.runs = slices.Delete(s.runs, i+1, i+2)
			}
			return true
		case n+1 == r.lo:
			r.lo = n // the run before ends below n-1: no merge
			return true
		}
	}
	s.runs = slices.Insert(s.runs, i, seqRun{n, n})
	return true
}

// bounds are the smallest and the largest number in the set (0, 0 when empty).
func (s *seqSet) bounds() (lo, hi uint64) {
	if len(s.runs) == 0 {
		return 0, 0
	}
	return s.runs[0].lo, s.runs[len(s.runs)-1].hi
}

// gaps calls f with each range of numbers missing between the smallest and the largest.
func (s *seqSet) gaps(f func(from, to uint64)) {
	for i := 1; i < len(s.runs); i++ {
		f(s.runs[i-1].hi+1, s.runs[i].lo-1)
	}
}

// plural is n and word, with an s unless n is 1.
func plural[N int | int64 | uint64](n N, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprint(n) + " " + word + "s"
}
