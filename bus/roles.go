package bus

// Role is what a NATS connection is allowed to do. Every process that speaks NATS
// connects as one role, and the server confines it to the subjects below (deploy/
// holds the server configuration that says so). Workers and brokers have no role: they
// never reach NATS.
type Role string

// The roles.
const (
	// RoleReplica is an API replica: it publishes and subscribes everything of its
	// namespace (view and tool requests, replies, status events).
	RoleReplica Role = "replica"
	// RoleOperator is the operator CLI (and the demo agent of the development stack): it
	// publishes tool requests and the events of its admin changes (audit.admin.>), and
	// receives the replies sent to its own inboxes.
	RoleOperator Role = "operator"
	// RoleDebug is a person watching the bus with `nats sub`: it may subscribe to the
	// namespace and publish nothing.
	RoleDebug Role = "debug"
	// RoleAudit is a platform's reader of the audit trail (package audit): it may
	// subscribe to the namespace's audit subjects (`nats sub` watches them live) and
	// publish nothing. Keeping the trail is a JetStream stream's work, which the
	// platform's own NATS user sets up (docs/operating.md).
	RoleAudit Role = "audit"
	// RoleSystem is the NATS system account's user, for `nats server report` and the
	// like; it sees no application subject.
	RoleSystem Role = "system"
)

// Roles lists every role, in the order configurations list them.
var Roles = []Role{RoleReplica, RoleOperator, RoleDebug, RoleAudit, RoleSystem}

// User is the role's user name on the NATS server, e.g. agentfy-replica.
func (r Role) User() string { return "agentfy-" + string(r) }

// InboxPrefix is where a connection of role r receives its replies:
// agentfy.<deployment>.db<N>._INBOX.<role>. Inboxes live inside the namespace, so one
// permission confines a deployment and a subscriber on the namespace sees whole
// conversations; each role has its own, so the operator can be allowed its replies and
// nothing else.
func (n Namespace) InboxPrefix(r Role) string { return n.Prefix() + "._INBOX." + string(r) }

// Permissions are the subjects a role may publish to and subscribe to (NATS wildcards).
// An empty list allows nothing.
type Permissions struct {
	Publish   []string
	Subscribe []string
}

// Permissions returns what role r may do in namespace n; the system role has no
// application permissions (it lives in the server's system account).
func (n Namespace) Permissions(r Role) Permissions {
	switch r {
	case RoleReplica:
		return Permissions{Publish: []string{n.Wildcard()}, Subscribe: []string{n.Wildcard()}}
	case RoleOperator:
		return Permissions{Publish: []string{n.AllOf(VerbTool), n.AuditAdminWildcard()}, Subscribe: []string{n.InboxPrefix(r) + ".>"}}
	case RoleAudit:
		return Permissions{Subscribe: []string{n.AuditWildcard()}}
	case RoleDebug:
		return Permissions{Subscribe: []string{n.Wildcard()}}
	}
	return Permissions{}
}
