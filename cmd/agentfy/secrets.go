package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/cmd/internal/conf"
	"github.com/agentfy/agentfy/deploy"
)

// cmdSecrets writes a deployment's role credentials and the server configurations that
// hold their hashes: what the compose stack's secrets job runs once.
func cmdSecrets(_ context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("secrets", flag.ContinueOnError)
	out := fs.String("out", "", "write into this `directory` (created with mode 0700)")
	db := fs.Int("db", 0, "the Redis database `number` the deployment uses (part of the NATS namespace)")
	force := fs.Bool("force", false, "replace existing secrets (every process must then get the new ones)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("secrets: -out is required")
	}
	ns, err := bus.NewNamespace(conf.Deployment(), *db)
	if err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	if _, err := os.Stat(filepath.Join(*out, "nats", "nats-server.conf")); err == nil && !*force {
		fmt.Fprintf(stdout, "secrets exist in %s; kept (use -force to replace them)\n", *out)
		return nil
	}
	s, err := deploy.GenerateSecrets()
	if err != nil {
		return err
	}
	natsConf, err := deploy.NATSConfig(ns, s)
	if err != nil {
		return err
	}
	acl, err := deploy.RedisACL(ns.Deployment(), s)
	if err != nil {
		return err
	}
	// One directory per consumer, so that each container mounts only what is its own:
	// the servers their configurations (hashes only), each role its passwords.
	files := map[string]string{
		"nats/nats-server.conf": natsConf,
		"redis/users.acl":       acl,
		"replica/nats":          s.NATS[bus.RoleReplica] + "\n",
		"replica/redis":         s.Redis[deploy.RedisReplica] + "\n",
		"operator/nats":         s.NATS[bus.RoleOperator] + "\n",
		"operator/redis":        s.Redis[deploy.RedisOperator] + "\n",
		"debug/nats":            s.NATS[bus.RoleDebug] + "\n",
		"system/nats":           s.NATS[bus.RoleSystem] + "\n",
	}
	for name, content := range files {
		path := filepath.Join(*out, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return fmt.Errorf("secrets: %w", err)
		}
		// Written whole, then renamed, so a reader never sees half a file.
		if err := writeFileAtomic(path, []byte(content)); err != nil {
			return fmt.Errorf("secrets: %w", err)
		}
	}
	fmt.Fprintf(stdout, "wrote the credentials of namespace %s to %s (%d files)\n", ns.Prefix(), *out, len(files))
	return nil
}
