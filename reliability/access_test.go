package reliability

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/test/stacktest"
)

func TestAccess(t *testing.T) {
	c := client.Context(t)
	agent := client.NewAgent(t, "agent-access")
	_, passes, err := st.Sess.Start(c, agent)
	if err != nil {
		t.Fatal(err)
	}
	claims := func(exp time.Time, sub string) jwt.MapClaims {
		return jwt.MapClaims{"iss": "agentfy-dev", "aud": "agentfy-api", "sub": sub, "exp": exp.Unix(), "iat": time.Now().Unix()}
	}
	sign := func(m jwt.SigningMethod, key any, cl jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(m, cl).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	expired := sign(jwt.SigningMethodHS256, st.Secret, claims(time.Now().Add(-time.Minute), "u-alice"))
	badSig := sign(jwt.SigningMethodHS256, []byte("another-secret-of-thirty-two-bytes!!"), claims(time.Now().Add(time.Hour), "u-alice"))
	none := sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(time.Now().Add(time.Hour), "u-alice"))
	es256 := sign(jwt.SigningMethodES256, ecKey, claims(time.Now().Add(time.Hour), "u-alice"))
	otherTeam := client.Token(t, "u-carol")
	otherOrg, _, _ := st.Creds.CreateOrgKey(c, "org-globex", "production", []string{auth.ScopeWorkerLogsRead})
	otherEnv, _, _ := st.Creds.CreateOrgKey(c, "org-acme", "staging", []string{auth.ScopeWorkerLogsRead})
	noScope, _, _ := st.Creds.CreateOrgKey(c, "org-acme", "production", nil)

	human := func(r int) string { return client.ViewURL(r, agent) }
	partner := func(org string) string { return client.PartnerViewURL(0, org, agent) }
	consumeURL := st.Replicas[0].URL + "/v1/internal/worker-observations/consume"
	unknown := client.Do(t, http.MethodGet, client.ViewURL(0, "agent-nobody"), client.Token(t, "u-alice"), nil)

	cases := []struct {
		name, method, url, bearer string
		want                      int
		same404                   bool
	}{
		{"view_no_credential", http.MethodGet, human(0), "", http.StatusUnauthorized, false},
		{"view_expired_JWT", http.MethodGet, human(1), expired, http.StatusUnauthorized, false},
		{"view_JWT_with_a_bad_signature", http.MethodGet, human(0), badSig, http.StatusUnauthorized, false},
		{"view_JWT_with_alg_none", http.MethodGet, human(1), none, http.StatusUnauthorized, false},
		{"view_JWT_with_another_algorithm", http.MethodGet, human(0), es256, http.StatusUnauthorized, false},
		{"view_another_team's_JWT", http.MethodGet, human(1), otherTeam, http.StatusNotFound, true},
		{"partner_no_credential", http.MethodGet, partner("org-acme"), "", http.StatusUnauthorized, false},
		{"partner_key_of_another_organisation", http.MethodGet, partner("org-globex"), otherOrg, http.StatusNotFound, true},
		{"partner_key_of_another_organisation_on_ours", http.MethodGet, partner("org-acme"), otherOrg, http.StatusNotFound, true},
		{"partner_key_of_another_environment", http.MethodGet, partner("org-acme"), otherEnv, http.StatusNotFound, true},
		{"partner_key_without_the_scope", http.MethodGet, partner("org-acme"), noScope, http.StatusForbidden, false},
		{"partner_human_JWT", http.MethodGet, partner("org-acme"), client.Token(t, "u-alice"), http.StatusUnauthorized, false},
		{"status_feed_no_credential", http.MethodGet, st.Replicas[0].URL + stacktest.StatusPath(agent), "", http.StatusUnauthorized, false},
		{"status_feed_another_team", http.MethodGet, st.Replicas[0].URL + stacktest.StatusPath(agent), otherTeam, http.StatusNotFound, true},
		{"consume_no_credential", http.MethodPost, consumeURL, "", http.StatusUnauthorized, false},
		{"consume_worker_pass", http.MethodPost, consumeURL, passes.Worker, http.StatusForbidden, false},
		{"consume_organisation_key", http.MethodPost, consumeURL, noScope, http.StatusForbidden, false},
		{"worker_channel_broker_pass", http.MethodGet, st.Replicas[0].URL + "/v1/worker/channel", passes.Broker, http.StatusForbidden, false},
		{"worker_channel_no_credential", http.MethodGet, st.Replicas[0].URL + "/v1/worker/channel", "", http.StatusUnauthorized, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			observed := ""
			expected := fmt.Sprint(tc.want)
			if tc.same404 {
				expected += ", the unknown agent's body"
			}
			record(t, "Access (Cache-Control: no-store on every answer)", expected, &observed)
			var a stacktest.Response
			if tc.method == http.MethodPost {
				a = client.Do(t, tc.method, tc.url, tc.bearer, stringsReader(`{"requestId":"`+fmt.Sprintf("%064x", 1)+`"}`))
			} else {
				a = client.Do(t, tc.method, tc.url, tc.bearer, nil)
			}
			observed = fmt.Sprint(a.Status)
			if tc.same404 && a.Status == http.StatusNotFound {
				if a.Body == unknown.Body {
					observed += ", the unknown agent's body"
				} else {
					observed += ", a different body"
				}
			}
			if a.Status != tc.want || (tc.same404 && a.Body != unknown.Body) {
				t.Errorf("got %s", observed)
			}
		})
	}
}

// TestAccessChanges changes the directory through the admin API (on one replica's admin
// listener) under replicas that have already answered: the agent hints and refusal
// memory that spare Redis round trips (issue 17) must never make a change late. Access
// taken away is refused, and access given is granted, at the very next request on both
// replicas.
func TestAccessChanges(t *testing.T) {
	const area = "Access changes through the admin API (agent hints and refusal memory on both replicas)"
	unknown := client.Do(t, http.MethodGet, client.ViewURL(0, "agent-nobody"), client.Token(t, "u-alice"), nil)
	// view asks replica r as user and describes the answer: "live:false", "404, the
	// unknown agent's body", or the status and body.
	view := func(t *testing.T, r int, agent, user string) string {
		t.Helper()
		client.OpenGate(t, agent)
		a := client.Do(t, http.MethodGet, client.ViewURL(r, agent), client.Token(t, user), nil)
		return describe(a, unknown)
	}
	both := func(t *testing.T, agent, user string) string {
		t.Helper()
		return view(t, 0, agent, user) + " / " + view(t, 1, agent, user)
	}
	admin := func(t *testing.T, r int, method, path, body string, want int) {
		t.Helper()
		if a := client.Admin(t, r, method, path, body); a.Status != want {
			t.Fatalf("admin %s %s: %s, want %d", method, path, a.Summary(), want)
		}
	}

	t.Run("agent_moved_to_another_team", func(t *testing.T) {
		observed := ""
		const want = "old team's member 404, the unknown agent's body / 404, the unknown agent's body; new team's member live:false / live:false"
		record(t, area, want, &observed)
		agent := client.NewAgent(t, "agent-moved")
		// u-alice of team-atlas views through both replicas: each now hints the agent in
		// team-atlas; u-carol of team-borealis is refused by both, which remember it.
		if got := both(t, agent, "u-alice"); got != "live:false / live:false" {
			t.Fatalf("before the move: %s", got)
		}
		for range 2 {
			if got := both(t, agent, "u-carol"); got != "404, the unknown agent's body / 404, the unknown agent's body" {
				t.Fatalf("before the move, the other team: %s", got)
			}
		}
		admin(t, 1, http.MethodPut, "/v1/admin/agents/"+agent, `{"name":"Moved","team":"team-borealis","org":"org-acme","environment":"production"}`, http.StatusOK)
		observed = "old team's member " + both(t, agent, "u-alice") + "; new team's member " + both(t, agent, "u-carol")
		if observed != want {
			t.Errorf("got %s", observed)
		}
	})

	t.Run("member_removed_after_a_view", func(t *testing.T) {
		observed := ""
		const want = "404, the unknown agent's body / 404, the unknown agent's body"
		record(t, area, want, &observed)
		agent := client.NewAgent(t, "agent-revoked")
		if got := both(t, agent, "u-bob"); got != "live:false / live:false" {
			t.Fatalf("before the removal: %s", got)
		}
		admin(t, 0, http.MethodDelete, "/v1/admin/teams/team-atlas/members/u-bob", "", http.StatusNoContent)
		t.Cleanup(func() { _ = st.Dir.AddMember(client.Context(t), "team-atlas", "u-bob") })
		observed = both(t, agent, "u-bob")
		if observed != want {
			t.Errorf("got %s", observed)
		}
	})

	t.Run("member_added_after_refusals", func(t *testing.T) {
		observed := ""
		const want = "A live:false; B live:false"
		record(t, area, want, &observed)
		agent := client.NewAgent(t, "agent-refusal")
		// Three refusals on each replica: each now remembers its refusal with the
		// directory's generation and answers the next ones from a single GET.
		for range 3 {
			if got := both(t, agent, "u-dave"); got != "404, the unknown agent's body / 404, the unknown agent's body" {
				t.Fatalf("a stranger: %s", got)
			}
		}
		admin(t, 1, http.MethodPut, "/v1/admin/teams/team-atlas/members/u-dave", "", http.StatusNoContent)
		t.Cleanup(func() { _ = st.Dir.RemoveMember(client.Context(t), "team-atlas", "u-dave") })
		observed = fmt.Sprintf("A %s; B %s", view(t, 0, agent, "u-dave"), view(t, 1, agent, "u-dave"))
		if observed != want {
			t.Errorf("got %s", observed)
		}
	})

	t.Run("agent_deleted", func(t *testing.T) {
		observed := ""
		const want = "404, the unknown agent's body / 404, the unknown agent's body"
		record(t, area, want, &observed)
		agent := client.NewAgent(t, "agent-deleted")
		if got := both(t, agent, "u-alice"); got != "live:false / live:false" {
			t.Fatalf("before the deletion: %s", got)
		}
		admin(t, 0, http.MethodDelete, "/v1/admin/agents/"+agent, "", http.StatusNoContent)
		observed = both(t, agent, "u-alice")
		if observed != want {
			t.Errorf("got %s", observed)
		}
	})

	t.Run("organisation_key_created_then_revoked", func(t *testing.T) {
		observed := ""
		const want = "created: 200 / 200; revoked: 401 / 401"
		record(t, area, want, &observed)
		agent := client.NewAgent(t, "agent-partnered")
		a := client.Admin(t, 0, http.MethodPost, "/v1/admin/orgs/org-acme/keys", `{"environment":"production","scopes":["worker:logs:read"]}`)
		var created struct{ ID, Key string }
		if a.Status != http.StatusCreated || json.Unmarshal([]byte(a.Body), &created) != nil {
			t.Fatalf("create a key: %s", a.Summary())
		}
		partner := func(r int) int {
			client.OpenGate(t, agent)
			return client.Do(t, http.MethodGet, client.PartnerViewURL(r, "org-acme", agent), created.Key, nil).Status
		}
		observed = fmt.Sprintf("created: %d / %d", partner(0), partner(1))
		admin(t, 1, http.MethodDelete, "/v1/admin/orgs/org-acme/keys/"+created.ID, "", http.StatusNoContent)
		observed += fmt.Sprintf("; revoked: %d / %d", partner(0), partner(1))
		if observed != want {
			t.Errorf("got %s", observed)
		}
	})
}

// describe names a view's answer: "live:false", "404, the unknown agent's body", or its
// status and body.
func describe(a, unknown stacktest.Response) string {
	switch {
	case a.Status == http.StatusOK && strings.TrimSpace(a.Body) == `{"live":false}`:
		return "live:false"
	case a.Status == http.StatusNotFound && a.Body == unknown.Body:
		return "404, the unknown agent's body"
	}
	return a.Summary()
}
