package reliability

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/api/admin"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/replica"
	"github.com/agentfy/agentfy/wire"
)

// TestAdminListener attacks the admin API: no admin key, a credential of another kind,
// a revoked admin key, bodies too large or malformed, and the two listeners asked for
// each other's routes. Every refusal is a 4xx with the error body, answered within the
// request's deadline, and leaves the deployment's keys in Redis exactly as they were.
func TestAdminListener(t *testing.T) {
	const area = "Admin API (its own listener, admin keys only)"
	c := client.Context(t)
	orgKey, _, err := st.Creds.CreateOrgKey(c, "org-acme", "production", []string{auth.ScopeWorkerLogsRead})
	if err != nil {
		t.Fatal(err)
	}
	agent := client.NewAgent(t, "agent-admin-attack")
	_, passes, err := st.Sess.Start(c, agent)
	if err != nil {
		t.Fatal(err)
	}
	revokedKey, revoked, err := st.Creds.CreateAdminKey(c, "revoked")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := st.Creds.RevokeAdminKey(c, revoked.ID); err != nil || !ok {
		t.Fatalf("revoke: %v %v", ok, err)
	}
	member := client.Token(t, "u-alice")
	huge := `{"members":["` + strings.Repeat("u", admin.MaxBody) + `"]}`
	const put = "/v1/admin/teams/team-atlas/members/u-dave"
	agentBody := func(extra string) string {
		return `{"name":"A","team":"team-atlas","org":"org-acme","environment":"production"` + extra + `}`
	}
	cases := []struct {
		name, bearer, method, path, body string
		want                             int
		names                            string // a 400 whose message must name this member
	}{
		{"no_credential", "", http.MethodPut, put, "", http.StatusUnauthorized, ""},
		{"an_unknown_admin_key", "afa_0123456789abcdef_" + strings.Repeat("1", 64), http.MethodPut, put, "", http.StatusUnauthorized, ""},
		{"a_revoked_admin_key", revokedKey, http.MethodPut, put, "", http.StatusUnauthorized, ""},
		{"a_member's_JWT", member, http.MethodPut, put, "", http.StatusForbidden, ""},
		{"an_organisation_key", orgKey, http.MethodPut, put, "", http.StatusForbidden, ""},
		{"a_worker_pass", passes.Worker, http.MethodPut, put, "", http.StatusForbidden, ""},
		{"a_broker_pass", passes.Broker, http.MethodPut, put, "", http.StatusForbidden, ""},
		{"a_body_over_1_MiB", st.AdminKey, http.MethodPut, "/v1/admin/teams/team-atlas/members", huge, http.StatusRequestEntityTooLarge, ""},
		{"a_body_that_is_not_JSON", st.AdminKey, http.MethodPut, "/v1/admin/agents/" + agent, `team=team-borealis`, http.StatusBadRequest, ""},
		{"a_body_with_an_unknown_field", st.AdminKey, http.MethodPut, "/v1/admin/agents/" + agent, `{"name":"A","team":"team-borealis","org":"org-acme","environment":"production","owner":"me"}`, http.StatusBadRequest, "owner"},
		// The red team's: encoding/json matched TEAM to team and kept the last of two.
		{"a_field_beside_itself_in_another_case_(TEAM_after_team)", st.AdminKey, http.MethodPut, "/v1/admin/agents/" + agent, agentBody(`,"TEAM":"team-borealis"`), http.StatusBadRequest, "TEAM"},
		{"a_field_in_another_case_alone", st.AdminKey, http.MethodPut, "/v1/admin/agents/" + agent, `{"name":"A","Team":"team-borealis","org":"org-acme","environment":"production"}`, http.StatusBadRequest, "Team"},
		{"a_field_given_twice", st.AdminKey, http.MethodPut, "/v1/admin/agents/" + agent, agentBody(`,"team":"team-borealis"`), http.StatusBadRequest, "team"},
		{"a_random_string_with_two_dots", "abc.def.ghi", http.MethodPut, put, "", http.StatusUnauthorized, ""},
		{"a_string_shaped_like_an_organisation_key", "afk_0123456789abcdef_" + strings.Repeat("2", 64), http.MethodPut, put, "", http.StatusUnauthorized, ""},
		{"an_encoded_slash_in_an_id", st.AdminKey, http.MethodPut, "/v1/admin/users/u-a%2Fb", `{"name":"Slash"}`, http.StatusBadRequest, ""},
		{"an_agent_moved_to_an_unknown_team", st.AdminKey, http.MethodPut, "/v1/admin/agents/" + agent, `{"name":"A","team":"team-nowhere","org":"org-acme","environment":"production"}`, http.StatusNotFound, ""},
		{"a_key_for_another_organisation's_environment", st.AdminKey, http.MethodPost, "/v1/admin/orgs/org-globex/keys", `{"environment":"staging","scopes":["worker:logs:read"]}`, http.StatusNotFound, ""},
		{"a_member_list_with_a_stranger_in_it", st.AdminKey, http.MethodPut, "/v1/admin/teams/team-atlas/members", `{"members":["u-alice","u-nobody"]}`, http.StatusNotFound, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			observed := ""
			expected := fmt.Sprintf("%d, nothing changed", tc.want)
			record(t, area, expected, &observed)
			before := deploymentKeys(t, st)
			start := time.Now()
			a := client.AdminAs(t, 0, tc.bearer, tc.method, tc.path, tc.body)
			took := time.Since(start)
			after := deploymentKeys(t, st)
			observed = fmt.Sprint(a.Status)
			if maps.Equal(before, after) {
				observed += ", nothing changed"
			} else {
				observed += ", Redis changed"
			}
			if !strings.Contains(a.Body, `"error":{"code":`) {
				observed += ", no error body"
			}
			if tc.names != "" && !strings.Contains(a.Body, `\"`+tc.names+`\"`) {
				observed += ", the message does not name " + tc.names
			}
			if observed != expected || took > replica.BodyTimeout {
				t.Errorf("got %s in %v", observed, took)
			}
		})
	}

	t.Run("two_Authorization_headers,_on_both_listeners", func(t *testing.T) {
		observed := ""
		const want = "admin 400 / view 400 / consume 400 (ambiguous credential), nothing changed"
		record(t, area, want, &observed)
		before := deploymentKeys(t, st)
		two := func(method, url string) int {
			req, err := http.NewRequestWithContext(c, method, url, strings.NewReader(`{"name":"Two"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header["Authorization"] = []string{"Bearer " + st.AdminKey, "Bearer " + member}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			return resp.StatusCode
		}
		observed = fmt.Sprintf("admin %d / view %d / consume %d (ambiguous credential)",
			two(http.MethodPut, st.Replicas[0].AdminURL+"/v1/admin/users/u-two"),
			two(http.MethodGet, client.ViewURL(1, agent)),
			two(http.MethodPost, st.Replicas[0].URL+wire.ConsumePath))
		if maps.Equal(before, deploymentKeys(t, st)) {
			observed += ", nothing changed"
		} else {
			observed += ", Redis changed"
		}
		if observed != want {
			t.Errorf("got %s", observed)
		}
	})
	t.Run("admin_routes_on_the_public_listener", func(t *testing.T) {
		observed := ""
		const want = "404 with the admin key / 404 with a member's JWT"
		record(t, area, want, &observed)
		pub := st.Replicas[0].URL + put
		a := client.Do(t, http.MethodPut, pub, st.AdminKey, nil)
		b := client.Do(t, http.MethodPut, pub, member, nil)
		observed = fmt.Sprintf("%d with the admin key / %d with a member's JWT", a.Status, b.Status)
		if observed != want {
			t.Errorf("got %s", observed)
		}
	})
	t.Run("the_admin_key_on_the_public_routes", func(t *testing.T) {
		observed := ""
		const want = "view 401 / partner view 401"
		record(t, area, want, &observed)
		a := client.Do(t, http.MethodGet, client.ViewURL(0, agent), st.AdminKey, nil)
		b := client.Do(t, http.MethodGet, client.PartnerViewURL(1, "org-acme", agent), st.AdminKey, nil)
		observed = fmt.Sprintf("view %d / partner view %d", a.Status, b.Status)
		if observed != want {
			t.Errorf("got %s", observed)
		}
	})
	t.Run("audit_line_per_change_without_secrets", func(t *testing.T) {
		observed := ""
		const want = "one audit line naming the admin key, the action and the ids; no secret"
		record(t, area, want, &observed)
		before := logs.String()
		if a := client.Admin(t, 1, http.MethodPut, "/v1/admin/users/u-audited", `{"name":"Audited"}`); a.Status != http.StatusOK {
			t.Fatalf("put user: %s", a.Summary())
		}
		lines := strings.Split(strings.TrimPrefix(logs.String(), before), "\n")
		var audit []string
		for _, l := range lines {
			if strings.Contains(l, `"audit":true`) {
				audit = append(audit, l)
			}
		}
		keyID, secret := strings.Split(st.AdminKey, "_")[1], strings.Split(st.AdminKey, "_")[2]
		switch {
		case len(audit) != 1:
			observed = fmt.Sprintf("%d audit lines", len(audit))
		case !strings.Contains(audit[0], keyID) || !strings.Contains(audit[0], `"action":"user.put"`) || !strings.Contains(audit[0], "u-audited"):
			observed = "an audit line without the key, action or id: " + audit[0]
		case strings.Contains(logs.String(), secret):
			observed = "a secret in the log"
		default:
			observed = want
		}
		if observed != want {
			t.Errorf("got %s", observed)
		}
	})
}

// deploymentKeys reads every key of the directory and the credentials (what the admin
// API may write) with its value, through the operator's connection. Sessions, gates and
// grants, which other work changes meanwhile, are left out.
func deploymentKeys(t *testing.T, s *stack.Stack) map[string]string {
	t.Helper()
	ctx := client.Context(t)
	out := map[string]string{}
	prefix := s.NS.Keys().Prefix()
	scan := func(ctx context.Context, node redis.UniversalClient) error {
		iter := node.Scan(ctx, 0, s.NS.Keys().Pattern(), 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			kind, _, _ := strings.Cut(strings.TrimPrefix(k, prefix), ":")
			if !strings.Contains(" agent user team org orgkey adminkey directory ", " "+kind+" ") || strings.HasSuffix(k, ":session") {
				continue
			}
			var v string
			switch s.Client.Type(ctx, k).Val() {
			case "hash":
				v = fmt.Sprint(s.Client.HGetAll(ctx, k).Val())
			case "set":
				v = fmt.Sprint(s.Client.SMembers(ctx, k).Val())
			default:
				v = s.Client.Get(ctx, k).Val()
			}
			out[k] = v
		}
		return iter.Err()
	}
	var err error
	if cc, ok := s.Client.(*redis.ClusterClient); ok {
		// A Cluster's SCAN sees one node's keys: scan every master.
		var mu sync.Mutex
		err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			return scan(ctx, node)
		})
	} else {
		err = scan(ctx, s.Client)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}
