// Package change is every change an admin makes to a deployment's directory, keys and
// sessions, declared once: its Action, the ids it touched (Change), and the one
// implementation of each (Changer) that the admin API and the operator CLI both call.
// A caller records the returned Change as its log line and its audit event
// (audit.Admin), so the two never name or describe the same change differently.
package change

import (
	"iter"
	"maps"
)

// Action names a change. It is the audit event's action and the last tokens of its
// subject (bus.Namespace.AuditAdmin): lowercase words joined by '.'.
type Action string

// The actions, one per change. docs/operating.md lists them with their ids; the trail's
// readers match on them, so one is never renamed.
const (
	UserPut        Action = "user.put"
	TeamPut        Action = "team.put"
	OrgPut         Action = "org.put"
	MembersSet     Action = "members.set"
	MemberAdd      Action = "member.add"
	MemberRemove   Action = "member.remove"
	AgentPut       Action = "agent.put"
	AgentDelete    Action = "agent.delete"
	OrgKeyCreate   Action = "orgkey.create"
	OrgKeyRevoke   Action = "orgkey.revoke"
	AdminKeyCreate Action = "adminkey.create"
	AdminKeyRevoke Action = "adminkey.revoke"
	DirectorySeed  Action = "directory.seed"
	SessionStart   Action = "session.start"
	SessionStop    Action = "session.stop"
)

// Actions lists every Action, in the order above.
var Actions = []Action{
	UserPut, TeamPut, OrgPut, MembersSet, MemberAdd, MemberRemove, AgentPut, AgentDelete,
	OrgKeyCreate, OrgKeyRevoke, AdminKeyCreate, AdminKeyRevoke, DirectorySeed,
	SessionStart, SessionStop,
}

// Change is one change made: its action and what it touched. It never holds a secret:
// a key's id, never the key.
type Change struct {
	Action Action
	// IDs are the records the change touched as kind, id pairs (team, team-atlas, user,
	// u-dave), in the order the change's log line writes them.
	IDs []string
}

// newChange is a Change of action touching ids, given as kind, id pairs.
func newChange(action Action, ids ...string) Change {
	return Change{Action: action, IDs: ids}
}

// All yields the change's ids as kind, id pairs in their order: the log line's fields.
func (c Change) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for i := 0; i+1 < len(c.IDs); i += 2 {
			if !yield(c.IDs[i], c.IDs[i+1]) {
				return
			}
		}
	}
}

// Map is the change's ids by kind: the audit event's IDs (audit.Admin).
func (c Change) Map() map[string]string {
	m := make(map[string]string, len(c.IDs)/2)
	maps.Insert(m, c.All())
	return m
}
