package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/cmd/internal/apiconf"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/internal/dev/stack"
)

// external is what `agentfy-dev dev` uses instead of its own servers: a Redis (server,
// Cluster or Sentinel set) named by AGENTFY_REDIS_URL or AGENTFY_REDIS_ADDRS (and
// AGENTFY_REDIS_MASTER, AGENTFY_REDIS_CLUSTER, AGENTFY_REDIS_DB), and NATS servers named
// by AGENTFY_NATS_URL. Both must run the configurations `agentfy secrets -out DIR`
// wrote; dev logs every role in with the passwords in DIR.
type external struct {
	redis   *stack.RedisTarget // nil: start a redis-server
	redisDB int
	nats    []string // nil: run an embedded NATS server
	secrets *deploy.Secrets
}

// externalServers reads the environment; nil when it names no server.
func externalServers(secretsDir string) (*external, error) {
	redisSet := os.Getenv("AGENTFY_REDIS_URL") != "" || os.Getenv("AGENTFY_REDIS_ADDRS") != ""
	natsURL := os.Getenv("AGENTFY_NATS_URL")
	if !redisSet && natsURL == "" {
		return nil, nil
	}
	if secretsDir == "" {
		return nil, errors.New("dev: AGENTFY_REDIS_* or AGENTFY_NATS_URL names servers of your own: pass -secrets DIR (or AGENTFY_SECRETS_DIR), the directory `agentfy secrets -out DIR` wrote and the servers were configured from")
	}
	s, err := readSecrets(secretsDir)
	if err != nil {
		return nil, err
	}
	e := &external{secrets: s}
	if redisSet {
		o, err := apiconf.Redis(nil)
		if err != nil {
			return nil, fmt.Errorf("dev: %w", err)
		}
		t := &stack.RedisTarget{Addrs: o.Addrs, MasterName: o.MasterName, Cluster: o.MasterName == "" && (o.IsClusterMode || len(o.Addrs) > 1), Kind: "server"}
		switch {
		case t.MasterName != "":
			t.Kind = "sentinel"
		case t.Cluster:
			t.Kind = "cluster"
		}
		e.redis, e.redisDB = t, o.DB
	}
	for _, u := range strings.Split(natsURL, ",") {
		if u = strings.TrimSpace(u); u != "" {
			e.nats = append(e.nats, u)
		}
	}
	return e, nil
}

// readSecrets reads the role passwords `agentfy secrets -out dir` wrote.
func readSecrets(dir string) (*deploy.Secrets, error) {
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, name)) //nolint:gosec // the developer's own directory
		if err != nil {
			return "", fmt.Errorf("dev: -secrets: %w (write it with `go run ./cmd/agentfy secrets -out %s`)", err, dir)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	s := &deploy.Secrets{NATS: map[bus.Role]string{}, Redis: map[string]string{}}
	for role, name := range deploy.NATSSecretFiles {
		v, err := read(name)
		if err != nil {
			return nil, err
		}
		s.NATS[role] = v
	}
	for user, name := range deploy.RedisSecretFiles {
		v, err := read(name)
		if err != nil {
			return nil, err
		}
		s.Redis[user] = v
	}
	return s, nil
}
