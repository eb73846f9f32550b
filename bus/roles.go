package bus

// Role is what a NATS connection is allowed to do. Every process that speaks NATS
// connects as one role, and the server confines it to the subjects below (deploy/
// holds the server configuration that says so). Workers and brokers have no role: they
// never reach NATS.
type Role string

// The roles.
const (
	// RoleReplica is an API replica: it publishes and subscribes everything of its
	// namespace (view and tool requests, replies, status events, the audit events of
	// views and of its admin API) but the operator CLI's audit events.
	RoleReplica Role = "replica"
	// RoleOperator is the operator CLI (and the demo agent of the development stack): it
	// publishes tool requests and the events of its admin changes (audit.admin.cli.>,
	// never the admin API's), may create the audit stream (never change or delete it),
	// and receives the replies sent to its own inboxes.
	RoleOperator Role = "operator"
	// RoleDebug is a person watching the bus with `nats sub`: it may subscribe to the
	// namespace and publish nothing.
	RoleDebug Role = "debug"
	// RoleAudit is a platform's reader of the audit trail (package audit): it may
	// subscribe to the namespace's audit subjects (`nats sub` watches them live) and
	// read the audit stream through ordered consumers of its own (`agentfy audit`),
	// and publish nothing else: it cannot change, delete or add to the trail.
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
// An empty list allows nothing; PublishDeny takes subjects back out of Publish.
type Permissions struct {
	Publish     []string
	PublishDeny []string
	Subscribe   []string
}

// jsAPI is the subject of JetStream's API call verb on the audit stream: $JS.API.<verb>.
// AGENTFY_AUDIT (and its consumers, for verbs that name one after the stream).
func jsAPI(verb string) string { return "$JS.API." + verb + "." + AuditStream }

// Permissions returns what role r may do in namespace n; the system role has no
// application permissions (it lives in the server's system account).
func (n Namespace) Permissions(r Role) Permissions {
	switch r {
	case RoleReplica:
		return Permissions{Publish: []string{n.Wildcard()}, PublishDeny: []string{n.AuditAdminPrefix(AuditSourceCLI) + ".>"}, Subscribe: []string{n.Wildcard()}}
	case RoleOperator:
		return Permissions{
			Publish:   []string{n.AllOf(VerbTool), n.AuditAdminPrefix(AuditSourceCLI) + ".>", jsAPI("STREAM.CREATE"), jsAPI("STREAM.INFO")},
			Subscribe: []string{n.InboxPrefix(r) + ".>"},
		}
	case RoleAudit:
		// An ordered consumer: created (with its filter in the subject), pulled from,
		// asked about and deleted; the stream's state for its counts. Nothing else of
		// JetStream's API: no update, purge or message deletion.
		return Permissions{
			Publish: []string{
				jsAPI("STREAM.INFO"), jsAPI("CONSUMER.CREATE") + ".>", jsAPI("CONSUMER.MSG.NEXT") + ".>",
				jsAPI("CONSUMER.INFO") + ".>", jsAPI("CONSUMER.DELETE") + ".>",
			},
			Subscribe: []string{n.AuditWildcard(), n.InboxPrefix(r) + ".>"},
		}
	case RoleDebug:
		return Permissions{Subscribe: []string{n.Wildcard()}}
	}
	return Permissions{}
}
