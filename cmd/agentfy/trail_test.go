package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// trailNamespace points the CLI at a fresh deployment and Redis database 3, with no
// Redis URL (the audit commands open no Redis connection), and returns its namespace.
func trailNamespace(t *testing.T) bus.Namespace {
	t.Helper()
	ns, err := bus.NewNamespace(testenv.Deployment(t), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTFY_DEPLOYMENT", ns.Deployment())
	t.Setenv("AGENTFY_REDIS_URL", "")
	t.Setenv("AGENTFY_REDIS_DB", "3")
	t.Setenv("AGENTFY_LOG_LEVEL", "error")
	return ns
}

// auditServer runs a NATS server with the roles of ns's deployment and JetStream, as a
// platform runs it (testenv.StartPlatformNATS): no audit stream yet, and a platform
// user with every right, connected. It returns the server's URL, the roles' secrets
// and the platform's JetStream.
func auditServer(t *testing.T, ns bus.Namespace) (string, deploy.Secrets, jetstream.JetStream) {
	t.Helper()
	p := testenv.StartPlatformNATS(t, ns)
	pjs, err := jetstream.New(p.Platform)
	if err != nil {
		t.Fatal(err)
	}
	return p.URL, p.Secrets, pjs
}

// asRole gives the CLI role's NATS credentials (its user by default).
func asRole(t *testing.T, url string, secrets deploy.Secrets, role bus.Role) {
	t.Helper()
	t.Setenv("AGENTFY_NATS_URL", url)
	t.Setenv("AGENTFY_NATS_USER", "")
	t.Setenv("AGENTFY_NATS_PASSWORD", secrets.NATS[role])
}

// connectRole connects to url as role, its inboxes where the server lets it read them.
func connectRole(t *testing.T, url string, ns bus.Namespace, secrets deploy.Secrets, role bus.Role) *nats.Conn {
	t.Helper()
	nc, err := bus.Connect(bus.Config{Servers: []string{url}, Name: t.Name(), User: role.User(), Password: secrets.NATS[role], InboxPrefix: ns.InboxPrefix(role)}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// publisher connects an audit publisher as role, for replica (audit.Options).
func publisher(t *testing.T, url string, ns bus.Namespace, secrets deploy.Secrets, role bus.Role, replica, source string) *audit.Publisher {
	t.Helper()
	cfg := bus.Config{Servers: []string{url}, Name: replica, User: role.User(), Password: secrets.NATS[role], InboxPrefix: ns.InboxPrefix(role)}
	p, err := audit.Connect(cfg, ns, audit.Options{Replica: replica, Source: source}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

// closed closes p, waiting for the stream to acknowledge what it buffered.
func closed(t *testing.T, ctx context.Context, p *audit.Publisher) {
	t.Helper()
	if err := p.Close(ctx); err != nil || p.Dropped() > 0 {
		t.Fatalf("publisher closed: %v, %d events dropped", err, p.Dropped())
	}
}

// cli runs the CLI with args and returns what it printed and its error.
func cli(ctx context.Context, args ...string) (string, error) {
	var out bytes.Buffer
	err := run(ctx, args, &out)
	return out.String(), err
}

// mustCLI runs the CLI with args and fails the test on its error.
func mustCLI(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	out, err := cli(ctx, args...)
	if err != nil {
		t.Fatalf("agentfy %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// decodeLines decodes each line of out, one JSON object a line, into a T, refusing
// members T does not have.
func decodeLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var all []T
	for line := range strings.Lines(out) {
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		var v T
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		all = append(all, v)
	}
	return all
}

// TestAuditTrailCommands publishes a trail through audit publishers of two replicas and
// of the operator CLI, each with its role's credentials, into the stream `agentfy audit
// stream` made, and reads it back as the audit role: views by agent (with the agent's
// 401 kept on audit.view._) and by viewer, admin changes with the source their subject
// says, and a verification, which passes and then finds a forged source and a repeat.
// The roles cannot write where they may not.
func TestAuditTrailCommands(t *testing.T) {
	ctx := testenv.Context(t, 2*time.Minute)
	ns := trailNamespace(t)
	url, secrets, platform := auditServer(t, ns)

	asRole(t, url, secrets, bus.RoleOperator)
	if out := mustCLI(t, ctx, "audit", "stream"); !strings.Contains(out, ": made") {
		t.Fatalf("audit stream: %q", out)
	}
	if out := mustCLI(t, ctx, "audit", "stream"); !strings.Contains(out, "present, as audit.Stream configures it") {
		t.Fatalf("audit stream again: %q", out)
	}

	// The trail, in a known order: each publisher's events are acknowledged before
	// the next publishes.
	a := publisher(t, url, ns, secrets, bus.RoleReplica, "replica-a", audit.SourceAdminAPI)
	if err := a.Frame(ctx, audit.View{ViewerKind: audit.ViewerMember, ViewerID: "u-alice", Agent: "agent-scout", Team: "team-atlas", Organisation: "org-acme", Session: "s1"}); err != nil {
		t.Fatal(err)
	}
	a.View(ctx, audit.View{ViewerKind: audit.ViewerMember, Agent: "agent-scout", Outcome: "unauthenticated"})
	a.Admin(ctx, audit.Admin{AdminKey: "fedcba9876543210", Action: "member.add", IDs: map[string]string{"team": "team-atlas", "user": "u-dave"}})
	closed(t, ctx, a)
	b := publisher(t, url, ns, secrets, bus.RoleReplica, "replica-b", audit.SourceAdminAPI)
	b.View(ctx, audit.View{ViewerKind: audit.ViewerMember, ViewerID: "u-bob", Agent: "agent-ledger", Team: "team-ledger", Organisation: "org-acme", Outcome: "forbidden"})
	b.View(ctx, audit.View{ViewerKind: audit.ViewerPartner, ViewerID: "0123456789abcdef", Agent: "agent-ghost", Outcome: "not_found"})
	closed(t, ctx, b)
	c := publisher(t, url, ns, secrets, bus.RoleOperator, "cli", audit.SourceOperatorCLI)
	if err := c.AdminAcked(ctx, audit.Admin{Action: "user.put", IDs: map[string]string{"user": "u-erin"}}); err != nil {
		t.Fatal(err)
	}
	closed(t, ctx, c)

	asRole(t, url, secrets, bus.RoleAudit)
	views := func(args ...string) []audit.View {
		t.Helper()
		return decodeLines[audit.View](t, mustCLI(t, ctx, append([]string{"audit", "views"}, args...)...))
	}
	outcomes := func(vs []audit.View) string {
		var o []string
		for _, v := range vs {
			o = append(o, v.Agent+":"+v.Outcome)
		}
		return strings.Join(o, " ")
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"all", nil, "agent-scout:frame agent-scout:unauthenticated agent-ledger:forbidden agent-ghost:not_found"},
		{"agent with its 401", []string{"-agent", "agent-scout"}, "agent-scout:frame agent-scout:unauthenticated"},
		{"agent no record has", []string{"-agent", "agent-ghost"}, "agent-ghost:not_found"},
		{"viewer", []string{"-viewer", "u-bob"}, "agent-ledger:forbidden"},
		{"agent and viewer", []string{"-agent", "agent-scout", "-viewer", "u-alice", "-since", "1h"}, "agent-scout:frame"},
		{"nobody's", []string{"-agent", "agent-nobody"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := outcomes(views(tc.args...)); got != tc.want {
				t.Fatalf("audit views %v: %s, want %s", tc.args, got, tc.want)
			}
		})
	}
	first := views("-agent", "agent-scout")[0]
	if first.Replica != "replica-a" || first.Boot != a.Boot() || first.Seq != 1 || first.Count != 1 || first.Session != "s1" || first.Time.IsZero() {
		t.Fatalf("frame's event: %+v", first)
	}

	admin := decodeLines[audit.Admin](t, mustCLI(t, ctx, "audit", "admin"))
	if len(admin) != 2 || admin[0].Source != audit.SourceAdminAPI || admin[0].Action != "member.add" || admin[0].AdminKey != "fedcba9876543210" ||
		admin[1].Source != audit.SourceOperatorCLI || admin[1].Action != "user.put" || !maps.Equal(admin[1].IDs, map[string]string{"user": "u-erin"}) {
		t.Fatalf("audit admin: %+v", admin)
	}

	out := mustCLI(t, ctx, "audit", "verify")
	for _, want := range []string{"read 6 events (6 decisions) of 3 boots of 3 replicas", "boot " + a.Boot() + " of replica replica-a: seq 1 to 3 judged, 3 events", "no gap, no repeat"} {
		if !strings.Contains(out, want) {
			t.Fatalf("audit verify printed\n%s\nwant a line with %q", out, want)
		}
	}

	// A replica publishes what claims to be the operator CLI's change, with an origin
	// of its own: its subject says admin-api, and verify flags the claim.
	replica := connectRole(t, url, ns, secrets, bus.RoleReplica)
	rjs, err := jetstream.New(replica)
	if err != nil {
		t.Fatal(err)
	}
	forged := audit.Admin{Time: time.Now().UTC(), Source: audit.SourceOperatorCLI, Action: "user.put", IDs: map[string]string{"user": "u-mallory"},
		Origin: audit.Origin{Replica: "replica-a", Boot: "00000000000000aa", Seq: 1, Count: 1}}
	publishEvent(t, ctx, rjs, mustSubject(ns.AuditAdmin(bus.AuditSourceAPI, "user.put")), forged, forged.MsgID())
	admin = decodeLines[audit.Admin](t, mustCLI(t, ctx, "audit", "admin"))
	if got := admin[len(admin)-1]; got.Source != audit.SourceAdminAPI || got.IDs["user"] != "u-mallory" {
		t.Fatalf("the forged event reads %+v, want source admin-api (its subject's)", got)
	}
	out, err = cli(ctx, "audit", "verify")
	if err == nil || exitCode(err) != 1 || !strings.Contains(out, `source: event 7 on `+ns.Prefix()+`.audit.admin.api.user.put (admin-api) says source "operator-cli"`) {
		t.Fatalf("audit verify after a forged source: %v\n%s", err, out)
	}

	// A copy of replica-b's first event published again under a message id of its
	// own, as a retry after the duplicate window would be: a repeat.
	again := audit.View{Time: time.Now().UTC(), ViewerKind: audit.ViewerMember, ViewerID: "u-bob", Agent: "agent-ledger", Team: "team-ledger", Organisation: "org-acme", Outcome: "forbidden",
		Origin: audit.Origin{Replica: "replica-b", Boot: b.Boot(), Seq: 1, Count: 1}}
	publishEvent(t, ctx, rjs, ns.AuditView("agent-ledger"), again, again.MsgID()+"-again")
	out, err = cli(ctx, "audit", "verify")
	if err == nil || !strings.Contains(out, "repeat: replica replica-b boot "+b.Boot()+": seq 1 read 2 times") {
		t.Fatalf("audit verify after a repeat: %v\n%s", err, out)
	}
	// The same event under its own message id is a retry the stream keeps once.
	before := streamMsgs(t, ctx, platform)
	publishEvent(t, ctx, rjs, ns.AuditView("agent-ledger"), again, again.MsgID())
	if n := streamMsgs(t, ctx, platform); n != before {
		t.Fatalf("a retry within the duplicate window: %d events, want %d", n, before)
	}

	// Nothing reaches the stream that a role may not publish: the operator on the
	// admin API's subjects, the audit role anywhere. The server refuses each publish
	// (a permissions violation) before it answers the flush.
	for _, tc := range []struct {
		role    bus.Role
		subject string
	}{
		{bus.RoleOperator, mustSubject(ns.AuditAdmin(bus.AuditSourceAPI, "user.put"))},
		{bus.RoleAudit, mustSubject(ns.AuditAdmin(bus.AuditSourceCLI, "user.put"))},
		{bus.RoleAudit, ns.AuditView("agent-scout")},
	} {
		nc := connectRole(t, url, ns, secrets, tc.role)
		if err := nc.Publish(tc.subject, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if err := nc.FlushWithContext(ctx); err != nil {
			t.Fatal(err)
		}
		if err := nc.LastError(); !errors.Is(err, nats.ErrPermissionViolation) {
			t.Errorf("%s publishing on %s: %v, want a permissions violation", tc.role, tc.subject, err)
		}
	}
	// Nor may the audit role delete an event.
	auditor := connectRole(t, url, ns, secrets, bus.RoleAudit)
	ajs, err := jetstream.New(auditor)
	if err != nil {
		t.Fatal(err)
	}
	astream, err := ajs.Stream(ctx, bus.AuditStream) // its state: allowed
	if err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	err = astream.DeleteMsg(dctx, 1)
	cancel()
	if err == nil || !errors.Is(auditor.LastError(), nats.ErrPermissionViolation) {
		t.Errorf("the audit role deleting an event: %v (last error %v)", err, auditor.LastError())
	}
	if n := streamMsgs(t, ctx, platform); n != before {
		t.Fatalf("the stream holds %d events after refused publishes, want %d", n, before)
	}
}

// TestAuditVerifyFindsAGap verifies a trail in a stream the platform made deletable
// (which `agentfy audit stream` refuses): whole, then with events deleted. Only the
// range between the first and the last number read is judged.
func TestAuditVerifyFindsAGap(t *testing.T) {
	ctx := testenv.Context(t, 2*time.Minute)
	ns := trailNamespace(t)
	url, secrets, platform := auditServer(t, ns)
	cfg := audit.Stream(ns)
	cfg.DenyDelete, cfg.MaxBytes = false, 32<<20
	if _, err := platform.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}

	asRole(t, url, secrets, bus.RoleOperator)
	out, err := cli(ctx, "audit", "stream")
	if err == nil || exitCode(err) != 1 || !strings.Contains(out, "  deny_delete: false here, true in audit.Stream") ||
		!strings.Contains(out, "  note: max_bytes: 33554432 here, 8589934592 in audit.Stream") {
		t.Fatalf("audit stream over a deletable stream: %v\n%s", err, out)
	}

	p := publisher(t, url, ns, secrets, bus.RoleReplica, "replica-a", audit.SourceAdminAPI)
	for range 6 {
		if err := p.Frame(ctx, audit.View{ViewerKind: audit.ViewerMember, ViewerID: "u-alice", Agent: "agent-scout", Team: "team-atlas", Organisation: "org-acme"}); err != nil {
			t.Fatal(err)
		}
	}
	asRole(t, url, secrets, bus.RoleAudit)
	if out := mustCLI(t, ctx, "audit", "verify"); !strings.Contains(out, "seq 1 to 6 judged, 6 events") {
		t.Fatalf("audit verify of a whole trail:\n%s", out)
	}

	// Event 1 and 6 lost cannot be told from a window that begins after the first or
	// a boot that ended before the last; 3 and 4 lost is a gap.
	stream, err := platform.Stream(ctx, bus.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{1, 3, 4, 6} {
		if err := stream.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	out, err = cli(ctx, "audit", "verify")
	t.Logf("agentfy audit verify, events 1, 3, 4 and 6 deleted:\n%s\nagentfy: %v", out, err)
	gap := "gap: replica replica-a boot " + p.Boot() + ": seq 3 to 4 missing (2 events)"
	if exitCode(err) != 1 || !strings.Contains(out, gap) || !strings.Contains(out, "seq 2 to 5 judged, 2 events") || strings.Count(out, "gap:") != 1 {
		t.Fatalf("audit verify after deletions: %v\n%s\nwant %q", err, out, gap)
	}
}

// TestAuditCommandsRefuseBadInput: flags out of bounds, and no stream.
func TestAuditCommandsRefuseBadInput(t *testing.T) {
	ctx := testenv.Context(t, time.Minute)
	ns := trailNamespace(t)
	url, secrets, _ := auditServer(t, ns)
	asRole(t, url, secrets, bus.RoleAudit)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"audit", "views", "-agent", "agent.scout"}, "audit views: -agent"},
		{[]string{"audit", "views", "-viewer", strings.Repeat("u", 65)}, "audit views: -viewer"},
		{[]string{"audit", "views", "-since", "-1h"}, "audit views: -since"},
		{[]string{"audit", "admin", "-since", "0s"}, "audit admin: -since"},
		{[]string{"audit", "verify", "extra"}, "audit verify: unexpected arguments"},
		{[]string{"audit", "watch"}, `audit: unknown subcommand "watch"`},
		{[]string{"audit", "views"}, "audit views: no audit stream AGENTFY_AUDIT"},
		{[]string{"audit", "verify"}, "audit verify: no audit stream AGENTFY_AUDIT"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			if _, err := cli(ctx, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// TestSubjectCovers: a stream's subject keeps every event of the namespace only when
// it matches every subject of its audit wildcard.
func TestSubjectCovers(t *testing.T) {
	const want = "agentfy.prod.db0.audit.>"
	for _, tc := range []struct {
		filter string
		want   bool
	}{
		{"agentfy.prod.db0.audit.>", true},
		{"agentfy.*.*.audit.>", true},
		{"agentfy.>", true},
		{">", true},
		{"agentfy.prod.db0.audit.view.>", false},
		{"agentfy.prod.db0.audit.*", false},
		{"agentfy.prod.db1.audit.>", false},
		{"agentfy.prod.db0.>.x", false},
		{"agentfy.prod.db0", false},
	} {
		if got := subjectCovers(tc.filter, want); got != tc.want {
			t.Errorf("subjectCovers(%q): %v, want %v", tc.filter, got, tc.want)
		}
	}
}

// TestSeqSet adds numbers in and out of order and reads the runs and gaps.
func TestSeqSet(t *testing.T) {
	for _, tc := range []struct {
		name     string
		add      []uint64
		wantRuns []seqRun
		wantDup  []uint64
		wantGaps []seqRun
	}{
		{name: "in order", add: []uint64{1, 2, 3}, wantRuns: []seqRun{{1, 3}}},
		{name: "mid-boot", add: []uint64{7, 8, 10}, wantRuns: []seqRun{{7, 8}, {10, 10}}, wantGaps: []seqRun{{9, 9}}},
		{name: "fills a gap", add: []uint64{1, 3, 2}, wantRuns: []seqRun{{1, 3}}},
		{name: "extends down", add: []uint64{5, 4, 1}, wantRuns: []seqRun{{1, 1}, {4, 5}}, wantGaps: []seqRun{{2, 3}}},
		{name: "before all", add: []uint64{9, 2}, wantRuns: []seqRun{{2, 2}, {9, 9}}, wantGaps: []seqRun{{3, 8}}},
		{name: "repeats", add: []uint64{1, 2, 2, 1, 5, 5}, wantRuns: []seqRun{{1, 2}, {5, 5}}, wantDup: []uint64{2, 1, 5}, wantGaps: []seqRun{{3, 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s seqSet
			var dup []uint64
			for _, n := range tc.add {
				if !s.add(n) {
					dup = append(dup, n)
				}
			}
			var gaps []seqRun
			s.gaps(func(from, to uint64) { gaps = append(gaps, seqRun{from, to}) })
			if !slices.Equal(s.runs, tc.wantRuns) || !slices.Equal(gaps, tc.wantGaps) || !slices.Equal(dup, tc.wantDup) {
				t.Fatalf("runs %v gaps %v repeats %v, want %v %v %v", s.runs, gaps, dup, tc.wantRuns, tc.wantGaps, tc.wantDup)
			}
		})
	}
}

// publishEvent publishes e on subject through JetStream with message id id, and waits
// for the stream's acknowledgement.
func publishEvent(t *testing.T, ctx context.Context, js jetstream.JetStream, subject string, e any, id string) {
	t.Helper()
	data, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(subject)
	m.Data = data
	m.Header.Set(jetstream.MsgIDHeader, id)
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
}

// streamMsgs is how many events the audit stream holds.
func streamMsgs(t *testing.T, ctx context.Context, js jetstream.JetStream) uint64 {
	t.Helper()
	s, err := js.Stream(ctx, bus.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.Msgs
}

func mustSubject(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}
