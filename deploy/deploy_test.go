package deploy_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/deploy"
)

// TestNATSConfigConfinesRoles renders the NATS configuration and reads it back with the
// server's own parser: each role's user holds exactly the permissions bus says, the
// debug user may publish nothing, the system user lives in the system account, and no
// password appears in clear.
func TestNATSConfigConfinesRoles(t *testing.T) {
	ns, err := bus.NewNamespace("prod-eu", 3)
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := deploy.GenerateSecrets()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := deploy.NATSConfig(ns, secrets)
	if err != nil {
		t.Fatal(err)
	}
	for role, pw := range secrets.NATS {
		if strings.Contains(cfg, pw) {
			t.Fatalf("the %s password appears in clear", role)
		}
	}
	opts := &server.Options{}
	if err := opts.ProcessConfigString(cfg); err != nil {
		t.Fatalf("nats-server rejects the rendered configuration: %v\n%s", err, cfg)
	}
	if opts.SystemAccount != "SYS" || opts.NoAuthUser != "" || opts.MaxPayload != bus.MaxPayload {
		t.Fatalf("system account %q, no-auth user %q, max_payload %d (want %d)", opts.SystemAccount, opts.NoAuthUser, opts.MaxPayload, bus.MaxPayload)
	}
	users := map[string]*server.User{}
	for _, u := range opts.Users {
		users[u.Username] = u
	}
	if len(users) != len(bus.Roles) {
		t.Fatalf("%d users, want one per role", len(users))
	}
	for _, role := range bus.Roles {
		u := users[role.User()]
		if u == nil {
			t.Fatalf("no user for role %s", role)
		}
		want := ns.Permissions(role)
		switch role {
		case bus.RoleSystem:
			if u.Account == nil || u.Account.Name != "SYS" || u.Permissions != nil {
				t.Fatalf("system user: account %v, permissions %+v", u.Account, u.Permissions)
			}
			continue
		case bus.RoleDebug:
			if !slices.Equal(u.Permissions.Publish.Deny, []string{">"}) || len(u.Permissions.Publish.Allow) != 0 {
				t.Fatalf("%s publish permissions %+v, want deny >", role, u.Permissions.Publish)
			}
		default:
			if !slices.Equal(u.Permissions.Publish.Allow, want.Publish) || !slices.Equal(u.Permissions.Publish.Deny, want.PublishDeny) {
				t.Fatalf("%s publish %v but %v, want %v but %v", role, u.Permissions.Publish.Allow, u.Permissions.Publish.Deny, want.Publish, want.PublishDeny)
			}
		}
		if u.Account == nil || u.Account.Name != "AGENTFY" || !slices.Equal(u.Permissions.Subscribe.Allow, want.Subscribe) {
			t.Fatalf("%s: account %v, subscribe %v, want %v", role, u.Account, u.Permissions.Subscribe.Allow, want.Subscribe)
		}
		// Outside the namespace, a role may call JetStream's API on the audit stream
		// alone, and none but the verbs that read it or make it.
		for _, s := range append(append([]string{}, u.Permissions.Subscribe.Allow...), u.Permissions.Publish.Allow...) {
			if !strings.HasPrefix(s, ns.Prefix()+".") && !slices.Contains(auditStreamCalls[role], s) {
				t.Fatalf("%s may use %s, outside the namespace", role, s)
			}
		}
	}
}

// auditStreamCalls are the JetStream API subjects on the audit stream each role may
// publish: the operator makes the stream, the audit user reads it; nobody may update,
// purge or delete it, or delete a message of it.
var auditStreamCalls = map[bus.Role][]string{
	bus.RoleOperator: {"$JS.API.STREAM.CREATE.AGENTFY_AUDIT", "$JS.API.STREAM.INFO.AGENTFY_AUDIT"},
	bus.RoleAudit: {
		"$JS.API.STREAM.INFO.AGENTFY_AUDIT", "$JS.API.CONSUMER.CREATE.AGENTFY_AUDIT.>", "$JS.API.CONSUMER.MSG.NEXT.AGENTFY_AUDIT.>",
		"$JS.API.CONSUMER.INFO.AGENTFY_AUDIT.>", "$JS.API.CONSUMER.DELETE.AGENTFY_AUDIT.>",
	},
}

func TestRedisACL(t *testing.T) {
	secrets, err := deploy.GenerateSecrets()
	if err != nil {
		t.Fatal(err)
	}
	ns, err := bus.NewNamespace("prod-eu", 3)
	if err != nil {
		t.Fatal(err)
	}
	acl, err := deploy.RedisACL(ns, secrets)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(acl), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "user default off ") {
		t.Fatalf("ACL file:\n%s", acl)
	}
	for _, pw := range secrets.Redis {
		if strings.Contains(acl, pw) {
			t.Fatal("a Redis password appears in clear")
		}
	}
	for i, user := range []string{deploy.RedisReplica, deploy.RedisOperator} {
		line := lines[i+1]
		keys := " ~agentfy:prod-eu:* "
		if user == deploy.RedisOperator {
			keys = " ~agentfy:prod-eu:agent:* ~agentfy:prod-eu:user:* "
		}
		if !strings.HasPrefix(line, "user "+user+" on #") || !strings.Contains(line, keys) ||
			!strings.Contains(line, " resetchannels -@all +") || !strings.HasSuffix(line, " +select|3") {
			t.Fatalf("line for %s: %s", user, line)
		}
		if user == deploy.RedisOperator && (strings.Contains(line, ":cap:") || strings.Contains(line, ":gate:") || strings.Contains(line, ":pace:") || strings.Contains(line, "prod-eu:*")) {
			t.Fatalf("the operator may touch a view's keys: %s", line)
		}
		for _, forbidden := range []string{"+@", "allkeys", "~*", "+keys", "+flushall", "+config", "+acl", "+publish", "nopass", "+select"} {
			if strings.Contains(line, forbidden+" ") || strings.HasSuffix(line, forbidden) {
				t.Fatalf("%s may %s: %s", user, forbidden, line)
			}
		}
	}
	if _, err := deploy.RedisACL(bus.Namespace{}, secrets); err == nil {
		t.Fatal("a namespace without a deployment was rendered")
	}
	if _, err := deploy.RedisACL(ns, deploy.Secrets{}); err == nil {
		t.Fatal("an ACL without passwords was rendered")
	}
}
