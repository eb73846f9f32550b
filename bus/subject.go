// Package bus owns the names and connections of NATS: subject names (Namespace),
// connections with a role's credential and permissions, and request/reply with
// deadlines and error codes carried in headers. Nothing else in the module builds a
// subject or dials NATS. Redis key names are keyspace's; Namespace.Keys only hands
// over the deployment's key builder. The embedded server of the development stack and the
// tests is internal/dev/natsserver, so that no production binary links a NATS server.
package bus

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/agentfy/agentfy/keyspace"
)

// Root is the first token of every subject this system uses (and of every Redis key).
const Root = keyspace.Root

// Keys is the key builder of the namespace's deployment. The Redis database is chosen by
// the connection, not by the key.
func (n Namespace) Keys() keyspace.Keys { return keyspace.For(n.deployment) }

// Verb is the kind of traffic a subject carries.
type Verb string

// The verbs. View and tool requests go to the replica that holds a session's worker
// socket; status events go to every replica.
const (
	VerbView   Verb = "view"
	VerbTool   Verb = "tool"
	VerbStatus Verb = "status"
)

// MaxDB is the largest Redis database number a namespace accepts.
const MaxDB = 1 << 16

var (
	deploymentRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	tokenRe      = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
)

// ErrBadToken is returned for a deployment, verb or session id that may not appear in a
// subject (empty, too long, or holding '.', '*', '>' or whitespace).
var ErrBadToken = errors.New("bus: invalid subject token")

// Namespace scopes subjects to one deployment and one Redis database, so that two
// deployments (or two Redis DBs of one deployment) sharing a NATS system never see each
// other's traffic.
type Namespace struct {
	deployment string
	db         int
}

// NewNamespace validates deployment (lowercase letters, digits and '-', at most 63) and
// db (0..MaxDB).
func NewNamespace(deployment string, db int) (Namespace, error) {
	if !deploymentRe.MatchString(deployment) {
		return Namespace{}, fmt.Errorf("%w: deployment %q", ErrBadToken, deployment)
	}
	if db < 0 || db > MaxDB {
		return Namespace{}, fmt.Errorf("%w: db %d", ErrBadToken, db)
	}
	return Namespace{deployment: deployment, db: db}, nil
}

// Deployment is the namespace's deployment name.
func (n Namespace) Deployment() string { return n.deployment }

// DB is the namespace's Redis database number.
func (n Namespace) DB() int { return n.db }

// Prefix is agentfy.<deployment>.db<N>.
func (n Namespace) Prefix() string {
	return Root + "." + n.deployment + ".db" + strconv.Itoa(n.db)
}

// Subject is agentfy.<deployment>.db<N>.<verb>.<sessionID>. It rejects an unknown verb
// and a session id that is not a single plain token.
func (n Namespace) Subject(verb Verb, sessionID string) (string, error) {
	if n.deployment == "" {
		return "", fmt.Errorf("%w: zero namespace", ErrBadToken)
	}
	switch verb {
	case VerbView, VerbTool, VerbStatus:
	default:
		return "", fmt.Errorf("%w: verb %q", ErrBadToken, verb)
	}
	if !tokenRe.MatchString(sessionID) {
		return "", fmt.Errorf("%w: session id", ErrBadToken)
	}
	return n.Prefix() + "." + string(verb) + "." + sessionID, nil
}

// SessionPlaceholder stands for the session id in a SubjectTemplate.
const SessionPlaceholder = "{session}"

// SubjectTemplate is the template of verb's subjects, Subject with SessionPlaceholder
// for the session id (agentfy.<deployment>.db<N>.view.{session}): the name a span gives
// the destination of every session alike (messaging.destination.name), never a
// session's id.
func (n Namespace) SubjectTemplate(verb Verb) string {
	return n.Prefix() + "." + string(verb) + "." + SessionPlaceholder
}

// AllOf is the wildcard subject for one verb across every session of the namespace,
// e.g. agentfy.prod.db0.status.*.
func (n Namespace) AllOf(verb Verb) string { return n.Prefix() + "." + string(verb) + ".*" }

// Wildcard is agentfy.<deployment>.db<N>.>, everything of the namespace.
func (n Namespace) Wildcard() string { return n.Prefix() + ".>" }

// The audit trail's subjects (package audit publishes on them): one event per view
// decision on agentfy.<deployment>.db<N>.audit.view.<agentId> when the decision read
// the agent's record, else on ….audit.view._ (an id no agent has, or a refusal before
// any read: an outsider's ids never make subjects of their own); one event per admin
// change on agentfy.<deployment>.db<N>.audit.admin.<source>.<action>, where the source
// token says who published it (api: the replicas' admin API, cli: the operator CLI),
// which the NATS server's permissions vouch for (Permissions), and an action is one or
// more lowercase words joined by '.' (user.put, orgkey.revoke), so it may span tokens.
const (
	// AuditToken is the subject token under which every audit event lives.
	AuditToken = "audit"
	// AuditViewToken and AuditAdminToken follow AuditToken.
	AuditViewToken  = "view"
	AuditAdminToken = "admin"
	// AuditNoAgent stands for the agent of a decision that read no agent's record:
	// an id no record has or can have (directory.ValidID), or a refusal before the
	// read (401). The event names the id asked for in its body when it is valid.
	AuditNoAgent = "_"
	// AuditSourceAPI and AuditSourceCLI are the admin events' source tokens: the
	// replicas' admin API and the operator CLI.
	AuditSourceAPI = "api"
	AuditSourceCLI = "cli"
	// AuditStream is the JetStream stream that keeps a deployment's audit trail, over
	// its namespace's AuditWildcard (package audit's Stream is its configuration). The
	// roles' permissions name it: the operator may create it, the audit role read it.
	AuditStream = "AGENTFY_AUDIT"
)

var actionRe = regexp.MustCompile(`^[a-z][a-z_]{0,31}(\.[a-z][a-z_]{0,31}){0,3}$`)

// AuditView is agentfy.<deployment>.db<N>.audit.view.<agentID>, or ….view._
// (AuditNoAgent) for an agent id that is not a plain token.
func (n Namespace) AuditView(agentID string) string {
	if !tokenRe.MatchString(agentID) {
		agentID = AuditNoAgent
	}
	return n.Prefix() + "." + AuditToken + "." + AuditViewToken + "." + agentID
}

// AuditAdmin is agentfy.<deployment>.db<N>.audit.admin.<source>.<action>. It rejects a
// source other than AuditSourceAPI and AuditSourceCLI, and an action that is not
// lowercase words joined by '.'.
func (n Namespace) AuditAdmin(source, action string) (string, error) {
	if n.deployment == "" {
		return "", fmt.Errorf("%w: zero namespace", ErrBadToken)
	}
	if source != AuditSourceAPI && source != AuditSourceCLI {
		return "", fmt.Errorf("%w: audit source %q", ErrBadToken, source)
	}
	if !actionRe.MatchString(action) {
		return "", fmt.Errorf("%w: action %q", ErrBadToken, action)
	}
	return n.AuditAdminPrefix(source) + "." + action, nil
}

// AuditAdminPrefix is agentfy.<deployment>.db<N>.audit.admin.<source>.
func (n Namespace) AuditAdminPrefix(source string) string {
	return n.Prefix() + "." + AuditToken + "." + AuditAdminToken + "." + source
}

// AuditWildcard is agentfy.<deployment>.db<N>.audit.>, every audit event of the
// namespace: what the audit role may read and the stream keeps.
func (n Namespace) AuditWildcard() string { return n.Prefix() + "." + AuditToken + ".>" }

// AuditViewWildcard is agentfy.<deployment>.db<N>.audit.view.>, every view event.
func (n Namespace) AuditViewWildcard() string {
	return n.Prefix() + "." + AuditToken + "." + AuditViewToken + ".>"
}

// AuditAdminWildcard is agentfy.<deployment>.db<N>.audit.admin.>, every admin change's
// event, of both sources.
func (n Namespace) AuditAdminWildcard() string {
	return n.Prefix() + "." + AuditToken + "." + AuditAdminToken + ".>"
}
