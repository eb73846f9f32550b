package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestAdminRoutes: each admin route once, the way a platform's sync job calls it, on
// the stack's Redis (a server, a Cluster or a Sentinel set), each change seen by a view
// on the other replica at its very next request.
func TestAdminRoutes(t *testing.T) {
	admin := func(r int, method, path, body string, want int) string {
		t.Helper()
		a := client.Admin(t, r, method, path, body)
		if a.Status != want {
			t.Fatalf("%s %s: %s, want %d", method, path, a.Summary(), want)
		}
		return a.Body
	}
	view := func(r int, agent, user string) int {
		t.Helper()
		client.OpenGate(t, agent)
		return client.Do(t, http.MethodGet, client.ViewURL(r, agent), client.Token(t, user), nil).Status
	}

	admin(0, http.MethodPut, "/v1/admin/users/u-erin", `{"name":"Erin"}`, http.StatusOK)
	admin(1, http.MethodPut, "/v1/admin/teams/team-cedar", `{"name":"Cedar"}`, http.StatusOK)
	admin(0, http.MethodPut, "/v1/admin/orgs/org-initech", `{"name":"Initech","environments":["production"]}`, http.StatusOK)
	admin(1, http.MethodPut, "/v1/admin/agents/agent-cedar", `{"name":"Cedar's agent","team":"team-cedar","org":"org-initech","environment":"production"}`, http.StatusOK)
	if got := view(0, "agent-cedar", "u-erin"); got != http.StatusNotFound {
		t.Fatalf("a stranger: %d, want 404", got)
	}
	admin(1, http.MethodPut, "/v1/admin/teams/team-cedar/members/u-erin", "", http.StatusNoContent)
	if got := view(0, "agent-cedar", "u-erin"); got != http.StatusOK {
		t.Fatalf("the new member at the next request: %d, want 200", got)
	}
	if b := admin(0, http.MethodGet, "/v1/admin/teams/team-cedar/members", "", http.StatusOK); b != `{"members":["u-erin"]}` {
		t.Errorf("members: %s", b)
	}
	admin(0, http.MethodPut, "/v1/admin/teams/team-cedar/members", `{"members":[]}`, http.StatusOK)
	if got := view(1, "agent-cedar", "u-erin"); got != http.StatusNotFound {
		t.Fatalf("removed with the whole list, at the next request: %d, want 404", got)
	}
	admin(1, http.MethodPut, "/v1/admin/teams/team-cedar/members/u-erin", "", http.StatusNoContent)
	admin(0, http.MethodDelete, "/v1/admin/teams/team-cedar/members/u-erin", "", http.StatusNoContent)
	if got := view(1, "agent-cedar", "u-erin"); got != http.StatusNotFound {
		t.Fatalf("removed, at the next request: %d, want 404", got)
	}

	var key struct{ ID, Key string }
	if err := json.Unmarshal([]byte(admin(0, http.MethodPost, "/v1/admin/orgs/org-initech/keys", `{"environment":"production","scopes":["worker:logs:read"]}`, http.StatusCreated)), &key); err != nil {
		t.Fatal(err)
	}
	partner := func(r int) int {
		client.OpenGate(t, "agent-cedar")
		return client.Do(t, http.MethodGet, client.PartnerViewURL(r, "org-initech", "agent-cedar"), key.Key, nil).Status
	}
	if got := partner(1); got != http.StatusOK {
		t.Fatalf("the new key: %d", got)
	}
	if list := admin(1, http.MethodGet, "/v1/admin/orgs/org-initech/keys", "", http.StatusOK); !strings.Contains(list, key.ID) || strings.Contains(list, key.Key) {
		t.Errorf("key list: %s", list)
	}
	admin(1, http.MethodDelete, "/v1/admin/orgs/org-initech/keys/"+key.ID, "", http.StatusNoContent)
	if got := partner(0); got != http.StatusUnauthorized {
		t.Fatalf("the revoked key at the next request: %d, want 401", got)
	}
	admin(0, http.MethodDelete, "/v1/admin/agents/agent-cedar", "", http.StatusNoContent)
	if got := view(1, "agent-cedar", "u-alice"); got != http.StatusNotFound {
		t.Fatalf("the deleted agent: %d, want 404", got)
	}
}
