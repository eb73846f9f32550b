// Package keyspace spells the Redis keys of a deployment: the only place a key's name is
// written. It is a leaf: the stores (auth, directory, session, view) use it without
// linking the bus.
package keyspace

import (
	"crypto/sha256"
	"encoding/hex"
)

// Root is the first token of every key (and of every NATS subject, bus.Root).
const Root = "agentfy"

// Keys builds the Redis keys of one deployment, the way bus.Namespace builds its NATS
// subjects: every key is agentfy:<deployment>:<kind>:{<tag>:<id>}[:<part>]. The braces
// are a Redis Cluster hash tag, so the keys of one record share a slot (an agent's gate,
// paces and current-session pointer; a session and its activity log; a team and its
// member and agent sets) and one script or transaction can touch them together. Nothing
// else in the module writes a key's name; the Redis ACLs grant exactly Pattern().
//
// Ids are used as given: every store validates or generates its ids before it builds a
// key (request ids are 64 hex digits, credential and session ids are random hex, and
// directory ids come from the operator's seed).
type Keys struct {
	prefix string
}

// For returns the key builder of deployment.
func For(deployment string) Keys { return Keys{prefix: Root + ":" + deployment + ":"} }

// Prefix is agentfy:<deployment>:, the start of every key of the deployment.
func (k Keys) Prefix() string { return k.prefix }

// Pattern is the glob of every key of the deployment (the Redis ACL's ~pattern).
func (k Keys) Pattern() string { return k.prefix + "*" }

// operatorKinds are the kinds of key the operator's Redis user may touch: every kind
// but a view's (cap, gate, pace), which only replicas read and write.
var operatorKinds = []string{"agent", "user", "org", "team", "directory", "orgkey", "adminkey", "pass", "session"}

// OperatorPatterns are the globs of the keys the operator's Redis user may touch (its
// ACL's ~patterns): the directory, credentials and sessions, never a view's grant,
// gate or pace.
func (k Keys) OperatorPatterns() []string {
	p := make([]string, len(operatorKinds))
	for i, kind := range operatorKinds {
		p[i] = k.prefix + kind + ":*"
	}
	return p
}

func (k Keys) tagged(kind, tag, id string) string {
	return k.prefix + kind + ":{" + tag + ":" + id + "}"
}

// The directory (package directory).

// Agent is an agent's record.
func (k Keys) Agent(id string) string { return k.tagged("agent", "a", id) }

// User is a user's record.
func (k Keys) User(id string) string { return k.tagged("user", "u", id) }

// UserTeams indexes the teams a user was made a member of (for listing only).
func (k Keys) UserTeams(id string) string { return k.User(id) + ":teams" }

// Org is an organisation's record.
func (k Keys) Org(id string) string { return k.tagged("org", "o", id) }

// Team is a team's record.
func (k Keys) Team(id string) string { return k.tagged("team", "t", id) }

// TeamMembers is a team's member set, the truth of membership.
func (k Keys) TeamMembers(id string) string { return k.Team(id) + ":members" }

// TeamAgents indexes the agents a seed put in a team (for listing only).
func (k Keys) TeamAgents(id string) string { return k.Team(id) + ":agents" }

// DirectoryGeneration counts the directory's changes: every write of the directory
// increments it after the write, so a replica that remembers a refusal can tell that
// the directory changed since (api's refusal memory).
func (k Keys) DirectoryGeneration() string { return k.prefix + "directory:generation" }

// Credentials (package auth).

// OrgKey is an organisation API key's record, by the key's id.
func (k Keys) OrgKey(id string) string { return k.tagged("orgkey", "k", id) }

// OrgKeys indexes an organisation's keys by id, in the organisation's slot (for
// listing only: the key's own record is the truth).
func (k Keys) OrgKeys(orgID string) string { return k.Org(orgID) + ":keys" }

// AdminKey is an admin key's record, by the key's id.
func (k Keys) AdminKey(id string) string { return k.tagged("adminkey", "m", id) }

// Pass is a worker or broker pass's record, by the pass's id.
func (k Keys) Pass(id string) string { return k.tagged("pass", "p", id) }

// Sessions (package session).

// Session is a worker session's record.
func (k Keys) Session(id string) string { return k.tagged("session", "s", id) }

// SessionActivity is a session's activity log, in the session's slot.
func (k Keys) SessionActivity(id string) string { return k.Session(id) + ":activity" }

// CurrentSession points from an agent to its current session, in the agent's slot.
func (k Keys) CurrentSession(agentID string) string { return k.Agent(agentID) + ":session" }

// Views (package view).

// Grant is a view grant, by the broker pass of the session it is for and its request
// id: in the pass's slot, so that the consume route checks the pass and redeems the
// grant in one script.
func (k Keys) Grant(brokerPassID, requestID string) string {
	return k.tagged("cap", "p", brokerPassID) + ":" + requestID
}

// Gate is an agent's view window, in the agent's slot.
func (k Keys) Gate(agentID string) string { return k.tagged("gate", "a", agentID) }

// PacePattern is the glob of every caller's pace for an agent.
func (k Keys) PacePattern(agentID string) string { return k.tagged("pace", "a", agentID) + ":*" }

// Pace is a caller's pace for an agent, in the agent's slot; the caller (a user or an
// organisation key) appears only as a hash.
func (k Keys) Pace(agentID, caller string) string {
	sum := sha256.Sum256([]byte(caller))
	return k.tagged("pace", "a", agentID) + ":" + hex.EncodeToString(sum[:12])
}
