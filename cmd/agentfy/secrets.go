package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
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
	out := fs.String("out", "", "write into this `directory`, one subdirectory per consumer")
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
	acl, err := deploy.RedisACL(ns, s)
	if err != nil {
		return err
	}
	jwt, err := randomSecret()
	if err != nil {
		return err
	}
	// One directory per consumer, so that each container mounts only what is its own:
	// the servers their configurations (hashes only, readable by the server's own user
	// whoever wrote them), each role its passwords (this user's alone).
	type secretFile struct {
		name, content string
		mode          os.FileMode
	}
	files := []secretFile{
		{"nats/nats-server.conf", natsConf, 0o644},
		{"redis/users.acl", acl, 0o644},
		{"jwt/secret", jwt + "\n", 0o600}, // the development HS256 secret of the replicas and the CLI
	}
	for role, name := range natsSecretFiles {
		files = append(files, secretFile{name, s.NATS[role] + "\n", 0o600})
	}
	for user, name := range redisSecretFiles {
		files = append(files, secretFile{name, s.Redis[user] + "\n", 0o600})
	}
	for _, f := range files {
		path := filepath.Join(*out, f.name)
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return fmt.Errorf("secrets: %w", err)
		}
		// Written whole, then renamed, so a reader never sees half a file.
		if err := writeFileMode(path, []byte(f.content), f.mode); err != nil {
			return fmt.Errorf("secrets: %w", err)
		}
	}
	fmt.Fprintf(stdout, "wrote the credentials of namespace %s to %s (%d files)\n", ns.Prefix(), *out, len(files))
	return nil
}

// The files of the role passwords, below the -out directory: what `agentfy secrets`
// writes and `agentfy dev -secrets` reads.
var (
	natsSecretFiles = map[bus.Role]string{
		bus.RoleReplica: "replica/nats", bus.RoleOperator: "operator/nats",
		bus.RoleDebug: "debug/nats", bus.RoleSystem: "system/nats",
	}
	redisSecretFiles = map[string]string{deploy.RedisReplica: "replica/redis", deploy.RedisOperator: "operator/redis"}
)

// randomSecret is 32 random bytes, base64url.
func randomSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("secrets: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// writeFileMode writes b to path through a temporary file and a rename, with mode.
func writeFileMode(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil { // whatever the umask said
		return err
	}
	return os.Rename(tmp, path)
}
