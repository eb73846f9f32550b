package reliability

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

const auditArea = "Audit trail (JetStream stream AGENTFY_AUDIT)"

// TestAuditOneEventPerDecision views with every kind of answer a viewer can get and
// makes an admin change: the stream holds exactly one event of each decision, and each
// boot's sequence is whole.
func TestAuditOneEventPerDecision(t *testing.T) {
	observed := ""
	record(t, auditArea, "one event per decision (frame, 429, live:false, 401, 404, an admin change), each boot's sequence without a gap or a repeat", &observed)
	stream := client.AuditStream(t)
	began := time.Now().Add(-time.Second).UTC()
	agent := "agent-audit-decisions"
	liveSession(t, agent, stack.SessionOptions{}) // its poll: a frame
	idle := client.NewAgent(t, "")
	alice := client.Token(t, "u-alice")
	for _, r := range []stacktest.Response{
		client.Get(t, st.Replicas[0].URL, stacktest.ViewPath(agent), alice), // the gate is closed: 429
		client.Get(t, st.Replicas[0].URL, stacktest.ViewPath(idle), alice),
		client.Get(t, st.Replicas[0].URL, stacktest.ViewPath(idle), "not-a-token"),
		client.Get(t, st.Replicas[1].URL, stacktest.ViewPath(idle), client.Token(t, "u-carol")),
	} {
		if r.Status >= http.StatusInternalServerError {
			t.Fatalf("a view: %s", r.Summary())
		}
	}
	if a := client.Admin(t, 1, http.MethodPut, "/v1/admin/users/u-audit-decisions", `{"name":"Audited"}`); a.Status != http.StatusOK {
		t.Fatalf("admin change: %d %s", a.Status, a.Body)
	}
	outcomes := func(agent string, n int) []string {
		var out []string
		for _, ev := range client.ViewEvents(t, stream, agent, n, nil) {
			out = append(out, ev.Outcome)
		}
		slices.Sort(out)
		return out
	}
	if got, want := outcomes(agent, 2), []string{"frame", "rate_limited"}; !slices.Equal(got, want) {
		t.Fatalf("events of the live agent: %q, want %q", got, want)
	}
	var idles []string
	for _, ev := range client.ViewEvents(t, stream, idle, 2, func(ev audit.View) bool { return ev.Outcome != "unauthenticated" }) {
		idles = append(idles, ev.Outcome)
	}
	slices.Sort(idles)
	if want := []string{"not_found", "not_live"}; !slices.Equal(idles, want) {
		t.Fatalf("events of the idle agent: %q, want %q", idles, want)
	}
	// The 401 names the agent, unless it folded with other 401s of its second on that
	// replica (the admin tests' just before, say): then the event names none and
	// counts them all.
	client.AuditEventWithin(t, stream, st.NS.AuditView(bus.AuditNoAgent), func(ev audit.View) bool {
		return ev.Outcome == "unauthenticated" && ev.Replica == "replica-a" && !ev.Time.Before(began) &&
			(ev.Agent == idle || (ev.Agent == "" && ev.Count >= 2))
	})
	subject, err := st.NS.AuditAdmin(bus.AuditSourceAPI, "user.put")
	if err != nil {
		t.Fatal(err)
	}
	admins := 0
	for _, m := range client.StoredMsgs(t, stream, subject) {
		if containsID(m.Data(), "u-audit-decisions") {
			admins++
		}
	}
	if admins != 1 {
		t.Fatalf("%d events of the admin change", admins)
	}
	events, boots := client.SequencesWhole(t, stream)
	observed = fmt.Sprintf("2 + 3 view events (the 401's perhaps folded with others of its second) and 1 admin event, as many as decisions; %d events of %d boots in the stream, each sequence whole", events, boots)
}

// containsID reports whether an admin event's ids name id.
func containsID(data []byte, id string) bool {
	var ev audit.Admin
	if err := json.Unmarshal(data, &ev); err != nil {
		return false
	}
	for _, v := range ev.IDs {
		if v == id {
			return true
		}
	}
	return false
}

// TestAuditStreamLost deletes the audit stream while a member watches: a view that
// would send a frame is answered 503 audit_unavailable and carries no frame, the other
// answers are given as ever; made again, the stream has every decision of the outage
// and frames are served again.
func TestAuditStreamLost(t *testing.T) {
	observed := ""
	record(t, auditArea, "the stream deleted: frames answered 503 audit_unavailable without a frame, live:false answered as ever; the stream made again: frames served, every decision of the outage in the trail, sequences whole", &observed)
	agent := "agent-audit-outage"
	liveSession(t, agent, stack.SessionOptions{})
	idle := client.NewAgent(t, "")
	alice := client.Token(t, "u-alice")
	remake := client.LoseAuditStream(t)
	before := client.UnavailableByReason(t)
	var during []string
	const outage = 3
	for range outage {
		client.OpenGate(t, agent)
		r := client.Get(t, st.Replicas[0].URL, stacktest.ViewPath(agent), alice)
		if r.Status != http.StatusServiceUnavailable {
			t.Fatalf("a frame without the trail: %s", r.Summary())
		}
		during = append(during, r.Summary())
		if r := client.Get(t, st.Replicas[0].URL, stacktest.ViewPath(idle), alice); r.Status != http.StatusOK || r.Result(t).Live {
			t.Fatalf("live:false without the trail: %s", r.Summary())
		}
	}
	if got := client.UnavailableByReason(t)["audit_unavailable"] - before["audit_unavailable"]; got != outage {
		t.Fatalf("agentfy_view_unavailable_total{reason=\"audit_unavailable\"} rose by %v, want %d", got, outage)
	}
	remake()
	after := client.Poll(t, agent)
	if after.Summary() != "200 frame" {
		t.Fatalf("after the stream is back: %s", after.Summary())
	}
	stream := client.AuditStream(t)
	unavailable := client.ViewEvents(t, stream, agent, outage, func(ev audit.View) bool { return ev.Reason == "audit_unavailable" })
	notLive := client.ViewEvents(t, stream, idle, outage, nil)
	client.SequencesWhole(t, stream)
	observed = fmt.Sprintf("%s ×%d (metric reason audit_unavailable); %d live:false; after: %s; the trail: %d audit_unavailable and %d not_live events, sequences whole",
		during[0], outage, outage, after.Summary(), len(unavailable), len(notLive))
}

// TestAuditFloodOfOutsiders sends a flood of unauthenticated views of many agent ids
// while a member watches: none of the member's events is lost, the 401s' events fold
// and their counts add up to the requests, and nothing is dropped.
func TestAuditFloodOfOutsiders(t *testing.T) {
	observed := ""
	record(t, auditArea, "a flood of 401s (many agent ids) while a member watches: every view of the member in the trail, the 401s' counts add up to the requests, none dropped", &observed)
	agent := "agent-audit-flood"
	liveSession(t, agent, stack.SessionOptions{})
	alice := client.Token(t, "u-alice")
	began := time.Now().Add(-time.Second)
	const flood, workers, watches = 4000, 8, 5
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < flood; i += workers {
				r := client.Get(t, st.Replicas[i%2].URL, stacktest.ViewPath("agent-flood-"+strconv.Itoa(i)), "not-a-token")
				if r.Status != http.StatusUnauthorized {
					t.Errorf("flood request %d: %s", i, r.Summary())
					return
				}
			}
		})
	}
	for range watches {
		client.OpenGate(t, agent)
		if r := client.Get(t, st.Replicas[0].URL, stacktest.ViewPath(agent), alice); r.Summary() != "200 frame" {
			t.Errorf("the member's view during the flood: %s", r.Summary())
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	stream := client.AuditStream(t)
	frames := client.ViewEvents(t, stream, agent, watches+1, func(ev audit.View) bool { return ev.Outcome == "frame" })
	decisions, events := 0, 0
	testenv.WaitFor(t, stacktest.AuditWait, "the flood's counts", func() bool {
		decisions, events = 0, 0
		for _, m := range client.StoredMsgs(t, stream, st.NS.AuditView(bus.AuditNoAgent)) {
			var ev audit.View
			if err := json.Unmarshal(m.Data(), &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Outcome == "unauthenticated" && !ev.Time.Before(began) {
				decisions += ev.Count
				events++
			}
		}
		return decisions >= flood
	})
	if decisions != flood {
		t.Fatalf("the 401s' events count %d decisions, want %d", decisions, flood)
	}
	dropped := 0.0
	for i := range st.Replicas {
		dropped += metricValue(t, "agentfy_audit_dropped_total", i)
	}
	if dropped != 0 {
		t.Fatalf("%v audit events dropped", dropped)
	}
	client.SequencesWhole(t, stream)
	observed = fmt.Sprintf("the member's %d frames in the trail (%d with the first poll's); %d 401s recorded in %d events; 0 dropped", watches, len(frames), decisions, events)
}

// TestAuditVerifyFindsAGap runs `agentfy audit verify` as the audit user on the stack's
// trail after events of a boot of its own were stored with one missing (as the
// platform's user, the one that may): it names the gap and exits 1; once the missing
// event is there, it names none for that boot.
func TestAuditVerifyFindsAGap(t *testing.T) {
	observed := ""
	record(t, auditArea, "agentfy audit verify names a gap in a boot's sequence (exit 1), and none once the event is there", &observed)
	ctx := client.Context(t)
	nc, err := st.ConnectPlatform("audit-forger")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	boot := "0000gap0" + strconv.FormatInt(time.Now().UnixNano()%1e8, 16)
	boot += strings.Repeat("0", 16-len(boot))
	store := func(seq uint64) {
		ev := audit.View{Time: time.Now().UTC().Truncate(time.Millisecond), ViewerKind: audit.ViewerMember, Outcome: "unauthenticated",
			Origin: audit.Origin{Replica: "replica-gap", Boot: boot, Seq: seq, Count: 1}}
		data, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(st.NS.AuditView(bus.AuditNoAgent))
		m.Data = data
		m.Header.Set(jetstream.MsgIDHeader, ev.MsgID())
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	store(1)
	store(3)
	pw := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pw, []byte(st.Secrets.NATS[bus.RoleAudit]), 0o600); err != nil {
		t.Fatal(err)
	}
	verify := func() (string, int) {
		cmd := exec.CommandContext(ctx, cliBin, "audit", "verify", "-since", "1h")
		cmd.Env = []string{"AGENTFY_NATS_URL=" + st.NATS.ClientURL(), "AGENTFY_NATS_USER=" + bus.RoleAudit.User(), "AGENTFY_NATS_PASSWORD_FILE=" + pw,
			"AGENTFY_DEPLOYMENT=" + st.NS.Deployment(), "AGENTFY_REDIS_DB=" + strconv.Itoa(st.NS.DB())}
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	gap := "gap: replica replica-gap boot " + boot + ": seq 2 missing"
	out, code := verify()
	if code != 1 || !strings.Contains(out, gap) {
		t.Fatalf("verify with a gap: exit %d\n%s", code, out)
	}
	store(2)
	after, _ := verify()
	if strings.Contains(after, "gap: replica replica-gap boot "+boot) || !strings.Contains(after, "boot "+boot+" of replica replica-gap: seq 1 to 3 judged") {
		t.Fatalf("verify after the gap was filled:\n%s", after)
	}
	observed = fmt.Sprintf("exit %d, %q; after the event was stored: no gap of that boot", code, gap)
}
