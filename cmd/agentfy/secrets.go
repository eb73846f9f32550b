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
	"strings"

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
	// A secret that exists is kept (every process already uses it) unless -force; a
	// missing one — a volume written by an older release — is made. The servers'
	// configurations hold only hashes and are rendered again each run, so a release
	// that narrows a role's rights takes effect on the next start.
	kept, made := 0, 0
	secret := func(name string, generate func() (string, error)) (string, error) {
		if !*force {
			b, err := os.ReadFile(filepath.Join(*out, name)) //nolint:gosec // the operator names the directory
			if err == nil && len(strings.TrimSpace(string(b))) > 0 {
				kept++
				return strings.TrimSpace(string(b)), nil
			}
		}
		made++
		return generate()
	}
	s := deploy.Secrets{NATS: map[bus.Role]string{}, Redis: map[string]string{}}
	for role, name := range deploy.NATSSecretFiles {
		if s.NATS[role], err = secret(name, randomSecret); err != nil {
			return err
		}
	}
	for user, name := range deploy.RedisSecretFiles {
		if s.Redis[user], err = secret(name, randomSecret); err != nil {
			return err
		}
	}
	jwt, err := secret(jwtSecretFile, randomSecret)
	if err != nil {
		return err
	}
	grantKey, err := secret(grantKeyFile, randomSecret) // 32 random bytes: a grant key
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
		{jwtSecretFile, jwt + "\n", 0o600},     // the development HS256 secret of the replicas and the CLI
		{grantKeyFile, grantKey + "\n", 0o600}, // the replicas' grant key (AGENTFY_CAPABILITY_KEY_FILE)
	}
	for role, name := range deploy.NATSSecretFiles {
		files = append(files, secretFile{name, s.NATS[role] + "\n", 0o600})
	}
	for user, name := range deploy.RedisSecretFiles {
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
	fmt.Fprintf(stdout, "wrote the credentials of namespace %s to %s: %d secrets kept, %d made, the NATS and Redis configurations rendered\n", ns.Prefix(), *out, kept, made)
	return nil
}

// The files of the development JWT secret and of the replicas' grant key.
const (
	jwtSecretFile = "jwt/secret"
	grantKeyFile  = "replica/capability-key"
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
