package access

import (
	"errors"
	"testing"

	"github.com/agentfy/agentfy/auth"
)

// The partner rule: the key of the agent's organisation and environment, with the
// scope.
func TestOrgAgent(t *testing.T) {
	reader := auth.OrgKey{OrgID: "acme", Environment: "production", Scopes: []string{auth.ScopeWorkerLogsRead}}
	noScope := auth.OrgKey{OrgID: "acme", Environment: "production", Scopes: []string{"agents:read"}}
	tests := []struct {
		name            string
		key             auth.OrgKey
		orgID, agentOrg string
		agentEnv        string
		wantErr         error
	}{
		{"allowed", reader, "acme", "acme", "production", nil},
		{"missing scope", noScope, "acme", "acme", "production", auth.ErrForbidden},
		{"key of another org", reader, "globex", "globex", "production", auth.ErrNotFound},
		{"agent of another org", reader, "acme", "globex", "production", auth.ErrNotFound},
		{"other environment", reader, "acme", "acme", "staging", auth.ErrNotFound},
		{"other environment and no scope", noScope, "acme", "acme", "staging", auth.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := orgAgent(tt.key, tt.orgID, tt.agentOrg, tt.agentEnv, auth.ScopeWorkerLogsRead); !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}
