package e2e

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/dev/stack"
)

// agentList is the body of GET /v1/agents.
type agentList struct {
	Agents []struct {
		ID     string `json:"id"`
		Name   string `json:"name"`
		Status string `json:"status"`
		Live   bool   `json:"live"`
	} `json:"agents"`
}

func listAgents(t *testing.T, bearer string) (int, agentList) {
	t.Helper()
	r := client.Get(t, replicaA(), "/v1/agents", bearer)
	var l agentList
	if r.Status == http.StatusOK {
		if err := json.Unmarshal([]byte(r.Body), &l); err != nil {
			t.Fatalf("body %s: %v", r.Body, err)
		}
	}
	return r.Status, l
}

func TestAgentList(t *testing.T) {
	running := client.NewAgent(t, "")
	stopped := client.NewAgent(t, "")
	startSession(t, running, stack.SessionOptions{})

	status, l := listAgents(t, client.Token(t, "u-alice"))
	if status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	got := map[string]string{}
	for i, a := range l.Agents {
		if i > 0 && l.Agents[i-1].ID >= a.ID {
			t.Fatalf("not sorted by id: %q before %q", l.Agents[i-1].ID, a.ID)
		}
		got[a.ID] = a.Status
		if a.Live != (a.Status != "stopped") {
			t.Fatalf("%+v: live and status disagree", a)
		}
	}
	if got[running] != "running" || got[stopped] != "stopped" || got["agent-scout"] == "" {
		t.Fatalf("alice's list %v: want %s running, %s stopped and agent-scout", got, running, stopped)
	}
	if _, ok := got["agent-nova"]; ok {
		t.Fatal("alice sees agent-nova of another team")
	}

	// Another team's member sees only that team's agents.
	_, l = listAgents(t, client.Token(t, "u-carol"))
	if len(l.Agents) != 1 || l.Agents[0].ID != "agent-nova" {
		t.Fatalf("carol's list: %+v", l.Agents)
	}

	// Revoking the membership empties the list at once.
	if err := st.Dir.RemoveMember(client.Context(t), "team-borealis", "u-dave"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Dir.AddMember(client.Context(t), "team-borealis", "u-dave") })
	if _, l = listAgents(t, client.Token(t, "u-dave")); len(l.Agents) != 0 {
		t.Fatalf("dave's list after removal: %+v", l.Agents)
	}

	// Members only: no token, a bad token and an organisation key are 401.
	key, _, err := st.Creds.CreateOrgKey(client.Context(t), "org-acme", "production", []string{auth.ScopeWorkerLogsRead})
	if err != nil {
		t.Fatal(err)
	}
	for name, bearer := range map[string]string{"none": "", "garbage": "x.y.z", "org key": key} {
		if status, _ := listAgents(t, bearer); status != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", name, status)
		}
	}
}
