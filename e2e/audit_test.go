package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// viewEventFields and adminEventFields are the documented members of an event
// (docs/operating.md, "Audit trail"): each event has exactly these.
var (
	viewEventFields  = []string{"agent", "organisation", "outcome", "reason", "session", "team", "time", "traceId", "viewerId", "viewerKind"}
	adminEventFields = []string{"action", "adminKey", "ids", "source", "time", "traceId"}
)

// auditStream makes a JetStream stream over every deployment's audit subjects
// (bus.AuditStreamSubjects), as a platform does with `nats stream add`, and deletes it
// when the test ends.
func auditStream(t *testing.T) jetstream.Stream {
	t.Helper()
	nc, err := st.ConnectPlatform("audit-keeper")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := client.Context(t)
	name := "AUDIT_" + strings.ToUpper(strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{bus.AuditStreamSubjects}, Storage: jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy, MaxAge: time.Hour, MaxBytes: 64 << 20, MaxMsgSize: audit.MaxEventBytes,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, name)
	})
	return s
}

// storedEvents waits until the stream holds want events on subject, then returns
// their bodies in order.
func storedEvents(t *testing.T, s jetstream.Stream, subject string, want int) [][]byte {
	t.Helper()
	ctx := client.Context(t)
	var n uint64
	testenv.WaitFor(t, 15*time.Second, strconv.Itoa(want)+" audit events on "+subject, func() bool {
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
		if err != nil {
			return false
		}
		n = info.State.Subjects[subject]
		return n >= uint64(want)
	})
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.FetchNoWait(int(n))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for m := range batch.Messages() {
		out = append(out, slices.Clone(m.Data()))
	}
	if err := batch.Error(); err != nil {
		t.Fatal(err)
	}
	if len(out) != int(n) {
		t.Fatalf("read %d of the %d events on %s", len(out), n, subject)
	}
	return out
}

// strictEvent decodes data into v refusing any member v does not have, and checks that
// it has every one of fields and no other.
func strictEvent(t *testing.T, data []byte, v any, fields []string) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("event %s: %v", data, err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		t.Fatal(err)
	}
	var got []string
	for k := range members {
		got = append(got, k)
	}
	slices.Sort(got)
	if !slices.Equal(got, fields) {
		t.Fatalf("event members %v, want %v: %s", got, fields, data)
	}
}

// TestAuditTrailOfEveryOutcome views agents with every outcome a view can have — a
// frame, a page null, live:false, 401, 403, 404, 429 and a 503 broker_down — and reads
// the audit trail back from a JetStream stream: exactly one event per view, on the
// agent's subject, with the documented members and nothing else, the viewer, the
// agent's team and organisation and the session as the view knew them, and nothing of
// the page (its URL, title or pixels) nor any credential.
func TestAuditTrailOfEveryOutcome(t *testing.T) {
	stream := auditStream(t)
	alice := client.Token(t, "u-alice")
	ctx := client.Context(t)
	reader, _, err := st.Creds.CreateOrgKey(ctx, "org-acme", "production", []string{auth.ScopeWorkerLogsRead})
	if err != nil {
		t.Fatal(err)
	}
	readerKey, err := st.Creds.VerifyOrgKey(ctx, reader)
	if err != nil {
		t.Fatal(err)
	}
	noScope, _, err := st.Creds.CreateOrgKey(ctx, "org-acme", "production", []string{"agents:read"})
	if err != nil {
		t.Fatal(err)
	}

	framed := client.NewAgent(t, "")
	framedSession := startSession(t, framed, stack.SessionOptions{})
	if _, err := framedSession.Tool(ctx, "browser_open", map[string]string{"url": st.Site + "/"}); err != nil {
		t.Fatal(err)
	}
	tabless := client.NewAgent(t, "")
	tablessSession := startSession(t, tabless, stack.SessionOptions{})
	idle := client.NewAgent(t, "") // no session
	brokerless := client.NewAgent(t, "")
	brokerlessSession := startSession(t, brokerless, stack.SessionOptions{BrokerHandler: http.NotFoundHandler()})
	if err := os.Remove(filepath.Join(brokerlessSession.IPCDir, "browser.sock")); err != nil {
		t.Fatal(err)
	}

	type want struct {
		kind, viewer, session, outcome, reason string
		status                                 int
	}
	cases := []struct {
		name  string
		agent string
		do    func() stacktest.Response
		want  want
	}{
		{"frame", framed, func() stacktest.Response { return client.Get(t, replicaA(), stacktest.ViewPath(framed), alice) },
			want{audit.ViewerMember, "u-alice", framedSession.ID, "frame", "", http.StatusOK}},
		{"rate limited", framed, func() stacktest.Response { return client.Get(t, replicaA(), stacktest.ViewPath(framed), alice) },
			want{audit.ViewerMember, "u-alice", framedSession.ID, "rate_limited", "", http.StatusTooManyRequests}},
		{"partner frame", framed, func() stacktest.Response {
			client.OpenGate(t, framed)
			return client.Get(t, replicaA(), stacktest.PartnerViewPath("org-acme", framed), reader)
		}, want{audit.ViewerPartner, readerKey.ID, framedSession.ID, "frame", "", http.StatusOK}},
		{"no tab", tabless, func() stacktest.Response { return client.Get(t, replicaA(), stacktest.ViewPath(tabless), alice) },
			want{audit.ViewerMember, "u-alice", tablessSession.ID, "no_tab", "", http.StatusOK}},
		{"not live", idle, func() stacktest.Response { return client.Get(t, replicaA(), stacktest.ViewPath(idle), alice) },
			want{audit.ViewerMember, "u-alice", "", "not_live", "", http.StatusOK}},
		{"unauthenticated", idle, func() stacktest.Response {
			return client.Get(t, replicaA(), stacktest.ViewPath(idle), "not-a-token")
		}, want{audit.ViewerMember, "", "", "unauthenticated", "", http.StatusUnauthorized}},
		{"forbidden", idle, func() stacktest.Response {
			return client.Get(t, replicaA(), stacktest.PartnerViewPath("org-acme", idle), noScope)
		}, want{audit.ViewerPartner, "", "", "forbidden", "", http.StatusForbidden}},
		{"not found", idle, func() stacktest.Response {
			return client.Get(t, replicaA(), stacktest.ViewPath(idle), client.Token(t, "u-carol"))
		}, want{audit.ViewerMember, "u-carol", "", "not_found", "", http.StatusNotFound}},
		{"broker down", brokerless, func() stacktest.Response {
			return client.Get(t, replicaA(), stacktest.ViewPath(brokerless), alice)
		}, want{audit.ViewerMember, "u-alice", brokerlessSession.ID, "unavailable", "broker_down", http.StatusServiceUnavailable}},
	}
	perAgent := map[string][]want{}
	var page string // the frame's bytes in base64, which no event may hold
	for _, c := range cases {
		r := c.do()
		if r.Status != c.want.status {
			t.Fatalf("%s: %s, want %d", c.name, r.Summary(), c.want.status)
		}
		if c.name == "frame" {
			page = r.Result(t).Page.Data
		}
		perAgent[c.agent] = append(perAgent[c.agent], c.want)
	}
	// The noScope key's id: the forbidden view's viewer.
	if k, err := st.Creds.VerifyOrgKey(ctx, noScope); err == nil {
		for i := range perAgent[idle] {
			if perAgent[idle][i].outcome == "forbidden" {
				perAgent[idle][i].viewer = k.ID
			}
		}
	} else {
		t.Fatal(err)
	}

	// A last view, after all the others: replica A publishes in order on one
	// connection, so once its event is stored every earlier one is, and a second event
	// of any decision would be too.
	last := client.NewAgent(t, "")
	if r := client.Get(t, replicaA(), stacktest.ViewPath(last), alice); r.Status != http.StatusOK {
		t.Fatalf("last view: %s", r.Summary())
	}
	storedEvents(t, stream, st.NS.AuditView(last), 1)

	secrets := []string{st.Site, "Northwind", page[:64], `"/9j/`, alice, reader, noScope, "not-a-token"}
	for agent, wants := range perAgent {
		events := storedEvents(t, stream, st.NS.AuditView(agent), len(wants))
		if len(events) != len(wants) {
			t.Fatalf("agent %s: %d events, want %d", agent, len(events), len(wants))
		}
		for i, data := range events {
			for _, s := range secrets {
				if strings.Contains(string(data), s) {
					t.Fatalf("audit event %d of %s holds page data or a credential (%.16q…)", i, agent, s)
				}
			}
			var ev audit.View
			strictEvent(t, data, &ev, viewEventFields)
			w := wants[i]
			if w.outcome == "frame" && w.kind == audit.ViewerMember {
				t.Logf("the event of a frame served: %s", data) // docs/operating.md's example
			}
			if ev.ViewerKind != w.kind || ev.ViewerID != w.viewer || ev.Agent != agent || ev.Session != w.session ||
				ev.Outcome != w.outcome || ev.Reason != w.reason {
				t.Fatalf("event %d of %s: %s, want %+v", i, agent, data, w)
			}
			// Every decision past the agent's record names its team and organisation.
			if w.outcome != "unauthenticated" && w.outcome != "forbidden" && (ev.Team != "team-atlas" || ev.Organisation != "org-acme") {
				t.Fatalf("event %d of %s: team %q organisation %q", i, agent, ev.Team, ev.Organisation)
			}
			if ev.Time.IsZero() || time.Since(ev.Time) > time.Minute || ev.Time.Location() != time.UTC {
				t.Fatalf("event %d of %s: time %v", i, agent, ev.Time)
			}
		}
	}
}

// TestAuditTrailOfAdminChanges makes changes through the admin API and reads their
// events back from a stream: one per change, on audit.admin.<action>, naming the admin
// key by its id and the ids touched, never the key itself or a created key's secret.
func TestAuditTrailOfAdminChanges(t *testing.T) {
	stream := auditStream(t)
	ctx := client.Context(t)
	admin, err := st.Creds.VerifyAdminKey(ctx, st.AdminKey)
	if err != nil {
		t.Fatal(err)
	}
	agent := client.NewAgent(t, "")
	if r := client.Admin(t, 0, http.MethodPut, "/v1/admin/teams/team-atlas/members/u-dave", ""); r.Status != http.StatusNoContent {
		t.Fatalf("add member: %d %s", r.Status, r.Body)
	}
	t.Cleanup(func() { client.Admin(t, 0, http.MethodDelete, "/v1/admin/teams/team-atlas/members/u-dave", "") })
	created := client.Admin(t, 0, http.MethodPost, "/v1/admin/orgs/org-acme/keys", `{"environment":"production","scopes":["worker:logs:read"]}`)
	if created.Status != http.StatusCreated {
		t.Fatalf("create key: %d %s", created.Status, created.Body)
	}
	var key struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	if err := json.Unmarshal([]byte(created.Body), &key); err != nil || key.ID == "" {
		t.Fatalf("created key %s: %v", created.Body, err)
	}
	if r := client.Admin(t, 0, http.MethodDelete, "/v1/admin/agents/"+agent, ""); r.Status != http.StatusNoContent {
		t.Fatalf("delete agent: %d %s", r.Status, r.Body)
	}
	for _, c := range []struct {
		action string
		ids    map[string]string
	}{
		{"member.add", map[string]string{"team": "team-atlas", "user": "u-dave"}},
		{"orgkey.create", map[string]string{"org": "org-acme", "key": key.ID, "environment": "production", "scopes": "worker:logs:read"}},
		{"agent.delete", map[string]string{"agent": agent}},
	} {
		subject, err := st.NS.AuditAdmin(c.action)
		if err != nil {
			t.Fatal(err)
		}
		events := storedEvents(t, stream, subject, 1)
		if len(events) != 1 {
			t.Fatalf("%s: %d events", c.action, len(events))
		}
		data := events[0]
		for _, s := range []string{st.AdminKey, key.Key} {
			if s != "" && strings.Contains(string(data), s) {
				t.Fatalf("%s event holds a key: %s", c.action, data)
			}
		}
		var ev audit.Admin
		strictEvent(t, data, &ev, adminEventFields)
		if ev.Source != audit.SourceAdminAPI || ev.AdminKey != admin.ID || ev.Action != c.action || !maps.Equal(ev.IDs, c.ids) {
			t.Fatalf("%s event %s, want key %s and ids %v", c.action, data, admin.ID, c.ids)
		}
	}
}

// TestViewsServedWhenAuditUnwritable removes the replicas' right to publish on the
// audit subjects (a live reload of the NATS server): views are served as before, and
// every event the server refuses is counted in agentfy_audit_dropped_total.
func TestViewsServedWhenAuditUnwritable(t *testing.T) {
	deny := func(o *server.Options) {
		for _, u := range o.Users {
			if u.Username == bus.RoleReplica.User() && u.Permissions != nil && u.Permissions.Publish != nil {
				u.Permissions.Publish.Deny = append(u.Permissions.Publish.Deny, st.NS.AuditWildcard())
			}
		}
	}
	if err := st.ReconfigureNATS(deny); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.ReconfigureNATS(nil); err != nil {
			t.Errorf("restore NATS permissions: %v", err)
		}
	})
	before := droppedAudit(t)
	agent := client.NewAgent(t, "")
	ss := startSession(t, agent, stack.SessionOptions{})
	if _, err := ss.Tool(client.Context(t), "browser_open", map[string]string{"url": st.Site + "/"}); err != nil {
		t.Fatal(err)
	}
	const views = 3
	for i := range views {
		client.OpenGate(t, agent)
		r := client.Get(t, replicaA(), stacktest.ViewPath(agent), client.Token(t, "u-alice"))
		if res := r.Result(t); r.Status != http.StatusOK || res.Page == nil {
			t.Fatalf("view %d with the audit subjects unwritable: %s", i, r.Summary())
		}
	}
	testenv.WaitFor(t, 10*time.Second, "the refused audit events counted", func() bool {
		return droppedAudit(t)-before >= views
	})
}

// droppedAudit is replica A's agentfy_audit_dropped_total, scraped from /metrics.
func droppedAudit(t *testing.T) float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(client.Context(t), http.MethodGet, st.Replicas[0].MetricsURL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "agentfy_audit_dropped_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatal("replica A exports no agentfy_audit_dropped_total")
	return 0
}
