package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/cmd/internal/apiconf"
	"github.com/agentfy/agentfy/cmd/internal/conf"
	"github.com/agentfy/agentfy/directory"
)

// `agentfy audit …` reads a deployment's audit trail (package audit) from its JetStream
// stream as the audit role, which may read the stream through ordered consumers of its
// own and nothing more: it cannot add to the trail, change or delete it. Every read is a
// snapshot: it ends at the stream's last event when the read began, and never waits for
// new ones.

// Limits of a read of the trail.
const (
	// trailRequestTimeout bounds each JetStream API call: the stream's state, a
	// consumer's creation, its state, its deletion, a stream's creation.
	trailRequestTimeout = 10 * time.Second
	// trailFetchWait bounds each fetch of a batch of events.
	trailFetchWait = 10 * time.Second
	// trailFetchBatch is how many events one fetch asks for at most, and
	// trailFetchMaxBytes how many bytes: more than the largest message a NATS server
	// carries (its max_payload is at most 64 MiB, the deployment's 8 MB), so that every
	// event fits in a fetch of its own.
	trailFetchBatch    = 512
	trailFetchMaxBytes = 72 << 20 // 72 MiB
	// trailEmptyFetches is how many fetches in a row may deliver nothing while the
	// consumer says events are pending before the read gives up.
	trailEmptyFetches = 3
	// trailConsumerIdle is when the server removes a consumer of a read that ended
	// without deleting it (the process was killed).
	trailConsumerIdle = time.Minute
	// trailDefaultSince is the window of a read without -since, and trailMaxSince
	// the longest one accepted: longer than any stream keeps events.
	trailDefaultSince = 24 * time.Hour
	trailMaxSince     = 10 * 366 * 24 * time.Hour
)

// cmdAudit reads, verifies and makes the audit trail.
func cmdAudit(ctx context.Context, args []string, stdout io.Writer) error {
	return subcommands(ctx, "audit", args, stdout, map[string]command{
		"views":  cmdAuditViews,
		"admin":  cmdAuditAdmin,
		"verify": cmdAuditVerify,
		"stream": cmdAuditStream,
	})
}

// trailFlags is a subcommand's flag set with -since; usage is its usage line and
// help what it does, for -h.
func trailFlags(name, usage, help string) (*flag.FlagSet, *time.Duration) {
	fs := flag.NewFlagSet("audit "+name, flag.ContinueOnError)
	since := fs.Duration("since", trailDefaultSince, "read the events the stream received in this last `duration`")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: agentfy audit %s\n\n%s\n\n", usage, help)
		fs.PrintDefaults()
	}
	return fs, since
}

// parseTrailFlags parses args into fs and checks -since; it returns the window's start.
func parseTrailFlags(fs *flag.FlagSet, args []string, since *time.Duration) (time.Time, error) {
	if err := fs.Parse(args); err != nil {
		return time.Time{}, err
	}
	if fs.NArg() > 0 {
		return time.Time{}, fmt.Errorf("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	if *since <= 0 || *since > trailMaxSince {
		return time.Time{}, fmt.Errorf("%s: -since must be a duration between 1ns and %s", fs.Name(), trailMaxSince)
	}
	return time.Now().Add(-*since), nil
}

// trail is a connection to a deployment's audit stream with one role's credentials.
type trail struct {
	nc *nats.Conn
	js jetstream.JetStream
	ns bus.Namespace
}

// openTrail connects to NATS as role (AGENTFY_NATS_*, the role's user by default) in
// the namespace of AGENTFY_DEPLOYMENT and the Redis database AGENTFY_REDIS_DB or
// AGENTFY_REDIS_URL names, as the other commands take them; it opens no Redis
// connection.
func openTrail(role bus.Role) (*trail, error) {
	log := conf.Logger("cli")
	warn := func(w string) { log.Warn().Msg(w) }
	ro, err := apiconf.Redis(warn)
	if err != nil {
		return nil, err
	}
	ns, err := apiconf.Namespace(ro)
	if err != nil {
		return nil, err
	}
	cfg, err := apiconf.NATS("agentfy-cli audit", ns, role, warn)
	if err != nil {
		return nil, err
	}
	nc, err := bus.Connect(cfg, log)
	if err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &trail{nc: nc, js: js, ns: ns}, nil
}

func (t *trail) close() { t.nc.Close() }

// explain makes a JetStream API call's error clear: no stream, no JetStream, a call
// the server's permissions refused (which shows as no answer).
func (t *trail) explain(err error) error {
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("no audit stream %s in this NATS account (the platform makes it, or `agentfy audit stream`)", bus.AuditStream)
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount), errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("JetStream does not answer on this NATS account (the audit trail needs it): %w", err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		if last := t.nc.LastError(); errors.Is(last, nats.ErrPermissionViolation) {
			return fmt.Errorf("the NATS server refused the call (this user's permissions): %w", last)
		}
		return fmt.Errorf("no answer within %s: %w", trailRequestTimeout, err)
	}
	return err
}

// read calls each with every event of the stream on one of subjects that the stream
// received since start, in stream order, up to the stream's last event when read
// began. It reads through an ordered consumer, in fetches of what the consumer says is
// pending, and stops when nothing is: it never waits for new events. each's error
// ends the read.
func (t *trail) read(ctx context.Context, subjects []string, start time.Time, each func(jetstream.Msg, *jetstream.MsgMetadata) error) error {
	cctx, cancel := context.WithTimeout(ctx, trailRequestTimeout)
	defer cancel()
	stream, err := t.js.Stream(cctx, bus.AuditStream)
	if err != nil {
		return t.explain(err)
	}
	last := stream.CachedInfo().State.LastSeq
	cons, err := t.js.OrderedConsumer(cctx, bus.AuditStream, jetstream.OrderedConsumerConfig{
		FilterSubjects:    subjects,
		DeliverPolicy:     jetstream.DeliverByStartTimePolicy,
		OptStartTime:      &start,
		InactiveThreshold: trailConsumerIdle,
		// Each fetch makes the consumer anew from where the last one ended; a
		// creation that fails ends the read rather than retrying for ever.
		MaxResetAttempts: 1,
	})
	if err != nil {
		return t.explain(err)
	}
	defer t.deleteConsumer(ctx, cons)
	pending := cons.CachedInfo().NumPending
	for empty := 0; pending > 0; {
		size := trailFetchBatch
		if pending < trailFetchBatch {
			size = int(pending)
		}
		done, n, err := t.fetch(ctx, cons, size, last, &pending, each)
		if err != nil || done {
			return err
		}
		if n > 0 {
			empty = 0
			continue
		}
		// A fetch that delivered nothing: events deleted under the read, or a slow
		// server. The consumer says what is left.
		if empty++; empty >= trailEmptyFetches {
			return fmt.Errorf("the stream says %d events are pending but delivered none in %d fetches", pending, empty)
		}
		ictx, cancel := context.WithTimeout(ctx, trailRequestTimeout)
		info, err := cons.Info(ictx)
		cancel()
		if err != nil {
			return t.explain(err)
		}
		pending = info.NumPending
	}
	return nil
}

// fetch reads one batch of at most n events and passes those up to the stream
// sequence last to each; it sets *pending to what the consumer says remains after the
// last one. done says the read reached last; delivered is how many events came.
func (t *trail) fetch(ctx context.Context, cons jetstream.Consumer, n int, last uint64, pending *uint64, each func(jetstream.Msg, *jetstream.MsgMetadata) error) (done bool, delivered int, err error) {
	fctx, cancel := context.WithTimeout(ctx, trailFetchWait)
	defer cancel()
	batch, err := cons.Fetch(n, jetstream.FetchMaxBytes(trailFetchMaxBytes), jetstream.FetchContext(fctx))
	if err != nil {
		return false, 0, t.explain(err)
	}
	// Every message of the batch is taken from the channel, also after an error, so
	// that the fetch ends.
	for m := range batch.Messages() {
		delivered++
		if err != nil || done {
			continue
		}
		md, merr := m.Metadata()
		if merr != nil {
			err = fmt.Errorf("event metadata: %w", merr)
			continue
		}
		if md.Sequence.Stream > last {
			done = true // an event that came after the read began
			continue
		}
		*pending = md.NumPending
		err = each(m, md)
		done = md.Sequence.Stream == last
	}
	if err != nil {
		return done, delivered, err
	}
	if berr := batch.Error(); berr != nil && !done {
		return false, delivered, fmt.Errorf("fetch: %w", t.explain(berr))
	}
	return done, delivered, nil
}

// deleteConsumer deletes the consumer a read used; one left behind (the call failed)
// goes after trailConsumerIdle.
func (t *trail) deleteConsumer(ctx context.Context, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), trailRequestTimeout)
	defer cancel()
	_ = t.js.DeleteConsumer(dctx, bus.AuditStream, info.Name)
}

// viewAgent is the agent token of a view event's subject (bus.AuditNoAgent for a
// decision that read no record); ok is false for a subject that is not a view event's.
func viewAgent(ns bus.Namespace, subject string) (string, bool) {
	prefix := strings.TrimSuffix(ns.AuditViewWildcard(), ">")
	agent, ok := strings.CutPrefix(subject, prefix)
	return agent, ok && agent != "" && !strings.Contains(agent, ".")
}

// adminSubject splits an admin event's subject into the source its token stands for
// (audit.SourceAdminAPI or audit.SourceOperatorCLI; "" for a token of neither) and
// the action; ok is false for a subject that is not an admin event's. The subject,
// not the body, says who published: the server lets each role publish its own only.
func adminSubject(ns bus.Namespace, subject string) (source, action string, ok bool) {
	prefix := strings.TrimSuffix(ns.AuditAdminWildcard(), ">")
	rest, ok := strings.CutPrefix(subject, prefix)
	if !ok {
		return "", "", false
	}
	token, action, ok := strings.Cut(rest, ".")
	if !ok || action == "" {
		return "", "", false
	}
	for _, s := range []string{audit.SourceAdminAPI, audit.SourceOperatorCLI} {
		if audit.SourceToken(s) == token {
			return s, action, true
		}
	}
	return "", action, true
}

// decodeEvent decodes an event's body into v; a body larger than any event is refused
// unread.
func decodeEvent(m jetstream.Msg, v any) error {
	if len(m.Data()) > audit.MaxEventBytes {
		return fmt.Errorf("%d bytes, more than an event's %d", len(m.Data()), audit.MaxEventBytes)
	}
	return json.Unmarshal(m.Data(), v)
}

// unreadable reports an event that could not be read, by its place in the stream (never
// its body).
func unreadable(w io.Writer, name string, md *jetstream.MsgMetadata, m jetstream.Msg, err error) {
	fmt.Fprintf(w, "agentfy %s: event %d on %s unreadable: %v\n", name, md.Sequence.Stream, m.Subject(), err)
}

// printEvents runs a read that prints events, one JSON object a line, through a buffer
// that is flushed at the end; skipped counts the events that could not be read, each
// reported on stderr.
func printEvents(ctx context.Context, fs *flag.FlagSet, stdout io.Writer, subjects []string, start time.Time, t *trail,
	each func(m jetstream.Msg, md *jetstream.MsgMetadata, enc *json.Encoder) error) error {
	out := bufio.NewWriter(stdout)
	enc := json.NewEncoder(out)
	skipped := 0
	err := t.read(ctx, subjects, start, func(m jetstream.Msg, md *jetstream.MsgMetadata) error {
		err := each(m, md, enc)
		var bad unreadableError
		if errors.As(err, &bad) {
			unreadable(os.Stderr, fs.Name(), md, m, bad.err)
			skipped++
			return nil
		}
		return err
	})
	if ferr := out.Flush(); err == nil && ferr != nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Name(), err)
	}
	if skipped > 0 {
		return fmt.Errorf("%s: %d events unreadable (above)", fs.Name(), skipped)
	}
	return nil
}

// unreadableError marks an event whose body is not an event: the read goes on.
type unreadableError struct{ err error }

func (e unreadableError) Error() string { return e.err.Error() }

// cmdAuditViews prints the view decisions' events.
func cmdAuditViews(ctx context.Context, args []string, stdout io.Writer) error {
	fs, since := trailFlags("views", "views [-agent ID] [-viewer ID] [-since DURATION]",
		"Prints the events of view decisions, one JSON object a line, oldest first (the stream's order).\n"+
			"-agent keeps one agent's: those on its subject and those on audit.view._ that name it\n"+
			"(a refusal before its record was read, a 401, lives there). -viewer keeps one member's or\n"+
			"organisation key's (viewerId).")
	agent := fs.String("agent", "", "only the events of the agent of this `id`")
	viewer := fs.String("viewer", "", "only the events of the viewer of this `id` (a user id or an organisation key's id)")
	start, err := parseTrailFlags(fs, args, since)
	if err != nil {
		return err
	}
	if *agent != "" && !directory.ValidID(*agent) {
		return fmt.Errorf("%s: -agent: not an agent id (1 to 64 of letters, digits, _ and -)", fs.Name())
	}
	if *viewer != "" && !directory.ValidID(*viewer) {
		return fmt.Errorf("%s: -viewer: not a user or key id (1 to 64 of letters, digits, _ and -)", fs.Name())
	}
	t, err := openTrail(bus.RoleAudit)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Name(), err)
	}
	defer t.close()
	subjects := []string{t.ns.AuditViewWildcard()}
	if *agent != "" {
		subjects = []string{t.ns.AuditView(*agent), t.ns.AuditView(bus.AuditNoAgent)}
		slices.Sort(subjects)
		subjects = slices.Compact(subjects) // an agent whose id is "_"
	}
	return printEvents(ctx, fs, stdout, subjects, start, t, func(m jetstream.Msg, _ *jetstream.MsgMetadata, enc *json.Encoder) error {
		var e audit.View
		if err := decodeEvent(m, &e); err != nil {
			return unreadableError{err}
		}
		if (*agent != "" && e.Agent != *agent) || (*viewer != "" && e.ViewerID != *viewer) {
			return nil
		}
		return enc.Encode(e)
	})
}

// cmdAuditAdmin prints the admin changes' events, each with the source its subject
// says.
func cmdAuditAdmin(ctx context.Context, args []string, stdout io.Writer) error {
	fs, since := trailFlags("admin", "admin [-since DURATION]",
		"Prints the events of admin changes, one JSON object a line, oldest first (the stream's order).\n"+
			"Each event's source is the one its subject says (audit.admin.api: admin-api, the replicas'\n"+
			"admin API; audit.admin.cli: operator-cli), whatever its body claims: the NATS server lets each\n"+
			"role publish its own only. `agentfy audit verify` reports a body that claims another.")
	start, err := parseTrailFlags(fs, args, since)
	if err != nil {
		return err
	}
	t, err := openTrail(bus.RoleAudit)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Name(), err)
	}
	defer t.close()
	return printEvents(ctx, fs, stdout, []string{t.ns.AuditAdminWildcard()}, start, t, func(m jetstream.Msg, _ *jetstream.MsgMetadata, enc *json.Encoder) error {
		source, _, ok := adminSubject(t.ns, m.Subject())
		if !ok {
			return unreadableError{errors.New("not an admin event's subject")}
		}
		var e audit.Admin
		if err := decodeEvent(m, &e); err != nil {
			return unreadableError{err}
		}
		e.Source = source
		return enc.Encode(e)
	})
}
