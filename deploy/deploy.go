// Package deploy holds what a deployment's servers are configured with — the NATS
// accounts and users and the Redis ACL users of each role — as templates (the files
// beside this one), and renders them for one namespace and one set of secrets. The
// development stack, the tests and `agentfy secrets` (the compose stack) all render the
// same files, so every deployment runs with the same roles. The container images and
// the compose check live here too.
package deploy

import (
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"golang.org/x/crypto/bcrypt"

	"github.com/agentfy/agentfy/bus"
)

var (
	//go:embed nats-server.conf.tmpl
	natsTemplate string
	//go:embed redis-users.acl.tmpl
	redisTemplate string
)

// Redis users. Workers and brokers have none: they never reach Redis.
const (
	RedisReplica  = "agentfy-replica"
	RedisOperator = "agentfy-operator"
)

// Commands each Redis user may run (besides AUTH, which every connection may): exactly
// what its code runs, and CLUSTER SLOTS and COMMAND, which a Cluster client reads the topology and the
// commands' key positions with. SELECT is granted for the deployment's database alone
// (RedisACL adds select|<db>). The replica serves views, passes and sessions; the
// operator seeds the directory, mints keys, starts and stops sessions, and may inspect
// the deployment's keys (SCAN, TYPE and the reads) — except a view's: its keys are
// keyspace.Keys.OperatorPatterns, which leave out grants, gates and paces.
var (
	ReplicaCommands = []string{
		"ping", "hello", "cluster|slots", "command",
		"get", "set", "del", "exists", "incr", "hget", "hmget", "hset", "hdel", "hgetall", "sadd", "srem", "sismember", "smembers",
		"pttl", "rpush", "ltrim", "lrange", "multi", "exec", "discard", "eval", "evalsha", "wait", "role",
	}
	OperatorCommands = []string{
		"ping", "hello", "cluster|slots", "command",
		"get", "set", "del", "incr", "hget", "hset", "hdel", "hgetall", "sadd", "srem", "sismember", "smembers",
		"lrange", "multi", "exec", "discard", "eval", "evalsha",
		"scan", "type", "exists", "pttl",
	}
)

// Secrets are the passwords of every role: random 256-bit values, base64url. The servers
// keep only their hashes.
type Secrets struct {
	NATS  map[bus.Role]string
	Redis map[string]string // by Redis user
}

// GenerateSecrets makes a fresh password for every NATS role and Redis user.
func GenerateSecrets() (Secrets, error) {
	s := Secrets{NATS: map[bus.Role]string{}, Redis: map[string]string{}}
	for _, r := range bus.Roles {
		p, err := password()
		if err != nil {
			return Secrets{}, err
		}
		s.NATS[r] = p
	}
	for _, u := range []string{RedisReplica, RedisOperator} {
		p, err := password()
		if err != nil {
			return Secrets{}, err
		}
		s.Redis[u] = p
	}
	return s, nil
}

func password() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("deploy: secret: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// bcryptCost is low on purpose: the passwords are random 256-bit values, which no
// amount of hashing makes easier or harder to guess, and every NATS connect (and
// reconnect) pays the cost.
const bcryptCost = 6

// NATSAccount is the NATS account nats-server.conf.tmpl puts every role's user in (but
// the system role's).
const NATSAccount = "AGENTFY"

type natsUser struct {
	User, Hash                      string
	Publish, PublishDeny, Subscribe string // quoted, comma-separated subjects
}

// NATSConfig renders the NATS server configuration for namespace ns: the AGENTFY account
// with the replica, operator, debug and audit users confined as bus.Namespace.Permissions
// says, and the system account's user.
func NATSConfig(ns bus.Namespace, s Secrets) (string, error) {
	users := map[bus.Role]natsUser{}
	for _, r := range bus.Roles {
		pw := s.NATS[r]
		if pw == "" {
			return "", fmt.Errorf("deploy: no NATS password for role %s", r)
		}
		h, err := bcrypt.GenerateFromPassword([]byte(pw), bcryptCost)
		if err != nil {
			return "", fmt.Errorf("deploy: hash NATS password: %w", err)
		}
		p := ns.Permissions(r)
		users[r] = natsUser{User: r.User(), Hash: string(h), Publish: quoteAll(p.Publish), PublishDeny: quoteAll(p.PublishDeny), Subscribe: quoteAll(p.Subscribe)}
	}
	var b strings.Builder
	err := template.Must(template.New("nats").Parse(natsTemplate)).Execute(&b, map[string]any{
		"Prefix": ns.Prefix(), "Replica": users[bus.RoleReplica], "Operator": users[bus.RoleOperator],
		"Debug": users[bus.RoleDebug], "Audit": users[bus.RoleAudit], "System": users[bus.RoleSystem],
	})
	if err != nil {
		return "", fmt.Errorf("deploy: render NATS config: %w", err)
	}
	return b.String(), nil
}

type redisUser struct {
	User, Hash, Keys, Commands string
}

// RedisACL renders the Redis ACL file for namespace ns: the default user off, and the
// replica and operator users confined to the deployment's keys (the operator to
// keyspace.Keys.OperatorPatterns), their commands and the namespace's database.
func RedisACL(ns bus.Namespace, s Secrets) (string, error) {
	if _, err := bus.NewNamespace(ns.Deployment(), ns.DB()); err != nil {
		return "", fmt.Errorf("deploy: %w", err)
	}
	keys := ns.Keys()
	user := func(name string, patterns, commands []string) (redisUser, error) {
		pw := s.Redis[name]
		if pw == "" {
			return redisUser{}, fmt.Errorf("deploy: no Redis password for %s", name)
		}
		sum := sha256.Sum256([]byte(pw))
		commands = append(slices.Clone(commands), "select|"+strconv.Itoa(ns.DB()))
		return redisUser{
			User: name, Hash: hex.EncodeToString(sum[:]),
			Keys: "~" + strings.Join(patterns, " ~"), Commands: "+" + strings.Join(commands, " +"),
		}, nil
	}
	replica, err := user(RedisReplica, []string{keys.Pattern()}, ReplicaCommands)
	if err != nil {
		return "", err
	}
	operator, err := user(RedisOperator, keys.OperatorPatterns(), OperatorCommands)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	err = template.Must(template.New("redis").Parse(redisTemplate)).Execute(&b, map[string]any{
		"Replica": replica, "Operator": operator,
	})
	if err != nil {
		return "", fmt.Errorf("deploy: render Redis ACL: %w", err)
	}
	return b.String(), nil
}

func quoteAll(subjects []string) string {
	q := make([]string, len(subjects))
	for i, s := range subjects {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// The files of the role passwords below a secrets directory: what `agentfy secrets`
// writes and `agentfy-dev dev -secrets` reads.
var (
	NATSSecretFiles = map[bus.Role]string{
		bus.RoleReplica: "replica/nats", bus.RoleOperator: "operator/nats",
		bus.RoleDebug: "debug/nats", bus.RoleAudit: "audit/nats", bus.RoleSystem: "system/nats",
	}
	RedisSecretFiles = map[string]string{RedisReplica: "replica/redis", RedisOperator: "operator/redis"}
)
