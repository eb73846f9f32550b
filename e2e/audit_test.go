package e2e

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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
	viewEventFields  = []string{"agent", "boot", "count", "organisation", "outcome", "reason", "replica", "seq", "session", "team", "time", "traceId", "viewerId", "viewerKind"}
	adminEventFields = []string{"action", "adminKey", "boot", "count", "ids", "replica", "seq", "source", "time", "traceId"}
)

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
	stream := client.AuditStream(t)
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
		if c.want.outcome == "unauthenticated" {
			// Checked apart: a 401 folds with the other 401s of its second on its
			// replica (an earlier test's), and then its event names no agent.
			continue
		}
		perAgent[c.agent] = append(perAgent[c.agent], c.want)
	}
	client.AuditEventWithin(t, stream, st.NS.AuditView(bus.AuditNoAgent), func(ev audit.View) bool {
		return ev.Outcome == "unauthenticated" && ev.ViewerKind == audit.ViewerMember && ev.ViewerID == "" && ev.Team == "" &&
			time.Since(ev.Time) < time.Minute && (ev.Agent == idle || (ev.Agent == "" && ev.Count >= 2))
	})
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
	client.ViewEvents(t, stream, last, 1, nil)

	secrets := []string{st.Site, "Northwind", page[:64], `"/9j/`, alice, reader, noScope, "not-a-token"}
	for agent, wants := range perAgent {
		events := client.ViewEvents(t, stream, agent, len(wants), func(ev audit.View) bool { return ev.Outcome != "unauthenticated" })
		if len(events) != len(wants) {
			t.Fatalf("agent %s: %d events, want %d", agent, len(events), len(wants))
		}
		for i, read := range events {
			data := read.Raw
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
				ev.Outcome != w.outcome || ev.Reason != w.reason || ev.Replica != "replica-a" || ev.Count != 1 || ev.Seq == 0 {
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
	events, boots := client.SequencesWhole(t, stream)
	t.Logf("the stream holds %d events of %d boots, each boot's sequence whole", events, boots)
}

// TestAuditTrailOfAdminChanges makes a change of every kind through the admin API and
// reads their events back from the audit stream: one per change, on
// audit.admin.api.<action>, naming the admin key by its id and the ids touched, never
// the key itself or a created key's secret.
func TestAuditTrailOfAdminChanges(t *testing.T) {
	stream := client.AuditStream(t)
	began := time.Now().Add(-time.Second).UTC()
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
	// Every other kind of change the admin API makes, on records of this test's own.
	for _, r := range []struct{ method, path, body string }{
		{http.MethodPut, "/v1/admin/users/u-audit-e2e", `{"name":"Audited"}`},
		{http.MethodPut, "/v1/admin/teams/team-audit-e2e", `{"name":"Audit"}`},
		{http.MethodPut, "/v1/admin/orgs/org-audit-e2e", `{"name":"Audit","environments":["production"]}`},
		{http.MethodPut, "/v1/admin/teams/team-audit-e2e/members", `{"members":["u-audit-e2e"]}`},
		{http.MethodDelete, "/v1/admin/teams/team-audit-e2e/members/u-audit-e2e", ``},
		{http.MethodPut, "/v1/admin/agents/agent-audit-e2e", `{"name":"Audit","team":"team-audit-e2e","org":"org-audit-e2e","environment":"production"}`},
		{http.MethodDelete, "/v1/admin/orgs/org-acme/keys/" + key.ID, ``},
	} {
		if a := client.Admin(t, 0, r.method, r.path, r.body); a.Status/100 != 2 {
			t.Fatalf("%s %s: %d %s", r.method, r.path, a.Status, a.Body)
		}
	}
	for _, c := range []struct {
		action string
		ids    map[string]string
	}{
		{"member.add", map[string]string{"team": "team-atlas", "user": "u-dave"}},
		{"orgkey.create", map[string]string{"org": "org-acme", "key": key.ID, "environment": "production", "scopes": "worker:logs:read"}},
		{"agent.delete", map[string]string{"agent": agent}},
		{"user.put", map[string]string{"user": "u-audit-e2e"}},
		{"team.put", map[string]string{"team": "team-audit-e2e"}},
		{"org.put", map[string]string{"org": "org-audit-e2e"}},
		{"members.set", map[string]string{"team": "team-audit-e2e", "added": "u-audit-e2e", "removed": ""}},
		{"member.remove", map[string]string{"team": "team-audit-e2e", "user": "u-audit-e2e"}},
		{"agent.put", map[string]string{"agent": "agent-audit-e2e", "team": "team-audit-e2e", "previousTeam": "", "org": "org-audit-e2e", "environment": "production"}},
		{"orgkey.revoke", map[string]string{"org": "org-acme", "key": key.ID}},
	} {
		subject, err := st.NS.AuditAdmin(bus.AuditSourceAPI, c.action)
		if err != nil {
			t.Fatal(err)
		}
		var events [][]byte
		testenv.WaitFor(t, 15*time.Second, "the event of "+c.action, func() bool {
			events = events[:0]
			for _, m := range client.StoredMsgs(t, stream, subject) {
				var ev audit.Admin
				if err := json.Unmarshal(m.Data(), &ev); err == nil && maps.Equal(ev.IDs, c.ids) && !ev.Time.Before(began) {
					events = append(events, m.Data())
				}
			}
			return len(events) > 0
		})
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
		if ev.Source != audit.SourceAdminAPI || ev.AdminKey != admin.ID || ev.Action != c.action || !maps.Equal(ev.IDs, c.ids) || ev.Count != 1 || ev.Replica == "" {
			t.Fatalf("%s event %s, want key %s and ids %v", c.action, data, admin.ID, c.ids)
		}
	}
}

// TestNoFrameWithoutTheTrail deletes the audit stream mid-run: a view that would send a
// frame is answered 503 audit_unavailable (the frame discarded), the other decisions
// are answered as ever, and once the stream is made again frames are served and every
// decision of the outage is in the trail, each boot's sequence whole.
func TestNoFrameWithoutTheTrail(t *testing.T) {
	ctx := client.Context(t)
	alice := client.Token(t, "u-alice")
	agent := client.NewAgent(t, "")
	ss := startSession(t, agent, stack.SessionOptions{})
	if _, err := ss.Tool(ctx, "browser_open", map[string]string{"url": st.Site + "/"}); err != nil {
		t.Fatal(err)
	}
	idle := client.NewAgent(t, "")
	if r := client.Get(t, replicaA(), stacktest.ViewPath(agent), alice); r.Status != http.StatusOK || r.Result(t).Page == nil {
		t.Fatalf("a view with the trail: %s", r.Summary())
	}
	remake := client.LoseAuditStream(t)
	before := client.UnavailableByReason(t)["audit_unavailable"]
	const outage = 3
	for i := range outage {
		client.OpenGate(t, agent)
		r := client.Get(t, replicaA(), stacktest.ViewPath(agent), alice)
		if r.Status != http.StatusServiceUnavailable || strings.Contains(r.Body, "data") {
			t.Fatalf("view %d without the trail: %s", i, r.Summary())
		}
		if r := client.Get(t, replicaA(), stacktest.ViewPath(idle), alice); r.Status != http.StatusOK {
			t.Fatalf("a view of an idle agent without the trail: %s", r.Summary())
		}
	}
	if got := client.UnavailableByReason(t)["audit_unavailable"] - before; got != outage {
		t.Fatalf("agentfy_view_unavailable_total{reason=\"audit_unavailable\"} rose by %v, want %d", got, outage)
	}
	remake()
	client.OpenGate(t, agent)
	if r := client.Get(t, replicaA(), stacktest.ViewPath(agent), alice); r.Status != http.StatusOK || r.Result(t).Page == nil {
		t.Fatalf("a view with the trail back: %s", r.Summary())
	}
	stream := client.AuditStream(t)
	var outcomes []string
	for _, ev := range client.ViewEvents(t, stream, agent, outage+1, nil) {
		outcomes = append(outcomes, ev.Outcome+" "+ev.Reason)
	}
	slices.Sort(outcomes)
	if want := []string{"frame ", "unavailable audit_unavailable", "unavailable audit_unavailable", "unavailable audit_unavailable"}; !slices.Equal(outcomes, want) {
		t.Fatalf("the agent's events %q, want %q", outcomes, want)
	}
	if n := len(client.ViewEvents(t, stream, idle, outage, nil)); n != outage {
		t.Fatalf("%d events of the idle agent's %d views", n, outage)
	}
	client.SequencesWhole(t, stream)
}
