package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/bus"
)

const streamHelp = `Makes the deployment's audit stream (` + bus.AuditStream + `, the configuration audit.Stream gives)
as the operator's NATS user, unless it is there: what the compose stack's one-off job runs,
as often as it likes. A stream of that name with another configuration is left as it is:
the differences that weaken the trail (its subjects, retention, discard policy, storage,
what may delete, purge, roll up or expire events, a shorter age or duplicate window, a
smaller event size, …) are printed and the command fails, as the operator may not change
the stream (the platform does); the platform's own choices (its size, replicas, …) are
printed as notes.`

// cmdAuditStream makes the audit stream unless it is there, and checks the one there.
func cmdAuditStream(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("audit stream", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: agentfy audit stream [-max-bytes N]\n\n%s\n\n", streamHelp)
		fs.PrintDefaults()
	}
	maxBytes := fs.Int64("max-bytes", audit.StreamMaxBytes, "the stream's size limit in bytes when it makes it (JetStream reserves it on the server's disk); full, it refuses new events and frames are answered 503 audit_unavailable")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *maxBytes < 1<<20 {
		return fmt.Errorf("%s: -max-bytes %d: want at least 1 MiB", fs.Name(), *maxBytes)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	t, err := openTrail(bus.RoleOperator)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Name(), err)
	}
	defer t.close()
	want := audit.Stream(t.ns)
	want.MaxBytes = *maxBytes
	cctx, cancel := context.WithTimeout(ctx, trailRequestTimeout)
	defer cancel()
	stream, err := t.js.Stream(cctx, bus.AuditStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = t.js.CreateStream(cctx, want)
		if err == nil {
			_, err = fmt.Fprintf(stdout, "audit stream %s over %s: made\n", bus.AuditStream, t.ns.AuditWildcard())
			return err
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return fmt.Errorf("%s: %w", fs.Name(), t.explain(err))
		}
		// Made meanwhile, by another job or the platform: check that one.
		stream, err = t.js.Stream(cctx, bus.AuditStream)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Name(), t.explain(err))
	}
	have := stream.CachedInfo().Config
	weak, notes := compareStream(t.ns, have, want)
	state := "present, as audit.Stream configures it"
	switch {
	case len(weak) > 0:
		state = "present with another configuration, which weakens the trail"
	case len(notes) > 0:
		state = "present, sized by the platform"
	}
	fmt.Fprintf(stdout, "audit stream %s over %s: %s\n", bus.AuditStream, strings.Join(have.Subjects, " "), state)
	for _, d := range weak {
		fmt.Fprintf(stdout, "  %s\n", d)
	}
	for _, d := range notes {
		fmt.Fprintf(stdout, "  note: %s\n", d)
	}
	if len(weak) > 0 {
		return fmt.Errorf("%s: the stream %s differs from audit.Stream in %d ways that weaken the trail (above): the platform changes it, the operator may not", fs.Name(), bus.AuditStream, len(weak))
	}
	return nil
}

// streamCheck is one property of the audit stream's configuration: how it is shown,
// and when a value weakens the trail; weak nil marks a platform's choice (its sizing).
type streamCheck struct {
	name string // as the JetStream API names it
	show func(jetstream.StreamConfig) string
	weak func(have, want jetstream.StreamConfig) bool
}

// compareStream lists how the stream there (have) differs from audit.Stream (want):
// weak, the differences that weaken the trail, and notes, the platform's choices.
func compareStream(ns bus.Namespace, have, want jetstream.StreamConfig) (weak, notes []string) {
	for _, c := range streamChecks(ns) {
		h, w := c.show(have), c.show(want)
		if h == w {
			continue
		}
		d := fmt.Sprintf("%s: %s here, %s in audit.Stream", c.name, h, w)
		if c.weak != nil && c.weak(have, want) {
			weak = append(weak, d)
		} else {
			notes = append(notes, d)
		}
	}
	return weak, notes
}

// streamChecks are the properties compareStream looks at, those that keep the trail
// whole first.
func streamChecks(ns bus.Namespace) []streamCheck {
	// switchCheck is the check of a switch whose value bad weakens the trail.
	switchCheck := func(name string, get func(jetstream.StreamConfig) bool, bad bool) streamCheck {
		return streamCheck{
			name: name,
			show: func(c jetstream.StreamConfig) string { return strconv.FormatBool(get(c)) },
			weak: func(have, _ jetstream.StreamConfig) bool { return get(have) == bad },
		}
	}
	return []streamCheck{
		{
			name: "subjects",
			show: func(c jetstream.StreamConfig) string { return strings.Join(c.Subjects, " ") },
			weak: func(have, _ jetstream.StreamConfig) bool {
				return !slices.ContainsFunc(have.Subjects, func(s string) bool { return subjectCovers(s, ns.AuditWildcard()) })
			},
		},
		{
			name: "retention",
			show: func(c jetstream.StreamConfig) string { return c.Retention.String() },
			weak: func(have, _ jetstream.StreamConfig) bool { return have.Retention != jetstream.LimitsPolicy },
		},
		{
			name: "discard",
			show: func(c jetstream.StreamConfig) string { return c.Discard.String() },
			weak: func(have, _ jetstream.StreamConfig) bool { return have.Discard != jetstream.DiscardNew },
		},
		{
			name: "storage",
			show: func(c jetstream.StreamConfig) string { return c.Storage.String() },
			weak: func(have, _ jetstream.StreamConfig) bool { return have.Storage != jetstream.FileStorage },
		},
		{
			name: "persist_mode",
			show: func(c jetstream.StreamConfig) string { return c.PersistMode.String() },
			weak: func(have, _ jetstream.StreamConfig) bool { return have.PersistMode == jetstream.AsyncPersistMode },
		},
		switchCheck("deny_delete", func(c jetstream.StreamConfig) bool { return c.DenyDelete }, false),
		switchCheck("deny_purge", func(c jetstream.StreamConfig) bool { return c.DenyPurge }, false),
		switchCheck("allow_rollup_hdrs", func(c jetstream.StreamConfig) bool { return c.AllowRollup }, true),
		switchCheck("allow_msg_ttl", func(c jetstream.StreamConfig) bool { return c.AllowMsgTTL }, true),
		switchCheck("sealed", func(c jetstream.StreamConfig) bool { return c.Sealed }, true),
		switchCheck("no_ack", func(c jetstream.StreamConfig) bool { return c.NoAck }, true),
		{
			name: "subject_transform",
			show: func(c jetstream.StreamConfig) string {
				if c.SubjectTransform == nil {
					return "none"
				}
				return c.SubjectTransform.Source + " to " + c.SubjectTransform.Destination
			},
			weak: func(have, _ jetstream.StreamConfig) bool { return have.SubjectTransform != nil },
		},
		{
			name: "max_age",
			show: func(c jetstream.StreamConfig) string { return limit(int64(c.MaxAge), c.MaxAge.String()) },
			weak: func(have, want jetstream.StreamConfig) bool { return have.MaxAge > 0 && have.MaxAge < want.MaxAge },
		},
		{
			name: "max_msgs_per_subject",
			show: func(c jetstream.StreamConfig) string { return limit(c.MaxMsgsPerSubject, "") },
			weak: func(have, _ jetstream.StreamConfig) bool { return have.MaxMsgsPerSubject > 0 },
		},
		{
			name: "max_msg_size",
			show: func(c jetstream.StreamConfig) string { return limit(int64(c.MaxMsgSize), "") },
			weak: func(have, want jetstream.StreamConfig) bool {
				return have.MaxMsgSize > 0 && have.MaxMsgSize < want.MaxMsgSize
			},
		},
		{
			// A publisher retries an event for audit.RetryFor under one message id: a
			// shorter window keeps a retried event twice.
			name: "duplicate_window",
			show: func(c jetstream.StreamConfig) string { return c.Duplicates.String() },
			weak: func(have, _ jetstream.StreamConfig) bool { return have.Duplicates < audit.RetryFor },
		},
		{name: "max_bytes", show: func(c jetstream.StreamConfig) string { return limit(c.MaxBytes, "") }},
		{name: "max_msgs", show: func(c jetstream.StreamConfig) string { return limit(c.MaxMsgs, "") }},
		{name: "num_replicas", show: func(c jetstream.StreamConfig) string { return strconv.Itoa(max(c.Replicas, 1)) }},
	}
}

// limit shows a JetStream limit: "unlimited" for 0 or less, else shown, or n.
func limit(n int64, shown string) string {
	switch {
	case n <= 0:
		return "unlimited"
	case shown != "":
		return shown
	}
	return strconv.FormatInt(n, 10)
}

// subjectCovers reports whether every subject that matches the NATS subject filter
// want also matches filter: a stream over filter keeps every event of want.
func subjectCovers(filter, want string) bool {
	f, w := strings.Split(filter, "."), strings.Split(want, ".")
	for i, tok := range f {
		if tok == ">" {
			return i == len(f)-1 && i < len(w) // '>' ends a filter and matches one token or more
		}
		if i >= len(w) || w[i] == ">" {
			return false // want goes on, or matches more tokens than filter
		}
		if tok != "*" && (tok != w[i] || w[i] == "*") {
			return false
		}
	}
	return len(f) == len(w)
}
