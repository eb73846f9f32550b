package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/dev/natsserver"
	"github.com/agentfy/agentfy/internal/dev/redisserver"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/view"
)

// TestSecretsCommand writes a deployment's credentials as the compose stack's secrets
// job does, then runs a real redis-server and NATS server with the files it wrote: the
// password files log in as their roles, and nothing logs in without one.
func TestSecretsCommand(t *testing.T) {
	ctx := testenv.Context(t, time.Minute)
	t.Setenv("AGENTFY_DEPLOYMENT", "compose")
	dir := filepath.Join(t.TempDir(), "secrets")
	var out bytes.Buffer
	if err := run(ctx, []string{"secrets", "-out", dir}, &out); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(filepath.Join(dir, name))
		want := os.FileMode(0o600) // a password
		if strings.HasSuffix(name, ".conf") || strings.HasSuffix(name, ".acl") {
			want = 0o644 // hashes only, read by the server's own user
		}
		if fi.Mode().Perm() != want {
			t.Fatalf("%s has mode %v, want %v", name, fi.Mode().Perm(), want)
		}
		return strings.TrimSpace(string(b))
	}
	if len(read("jwt/secret")) < 32 {
		t.Fatal("no JWT secret")
	}
	if _, err := view.ParseGrantKeys(read("replica/capability-key")); err != nil {
		t.Fatalf("the grant key: %v", err)
	}
	// A second run keeps what exists: the servers and clients already use it. A volume
	// of an older release, without a grant key, gets one and keeps the rest.
	before := read("replica/nats")
	if err := os.Remove(filepath.Join(dir, "replica/capability-key")); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(ctx, []string{"secrets", "-out", dir}, &out); err != nil || read("replica/nats") != before {
		t.Fatalf("second run replaced the secrets (%v)", err)
	}
	if !strings.Contains(out.String(), "8 secrets kept, 1 made") {
		t.Fatalf("second run said %q", out.String())
	}
	if _, err := view.ParseGrantKeys(read("replica/capability-key")); err != nil {
		t.Fatalf("the grant key made on the second run: %v", err)
	}

	rs := testenv.Redis(t, redisserver.Options{ACL: read("redis/users.acl") + "\n"})
	for user, file := range map[string]string{"agentfy-replica": "replica/redis", "agentfy-operator": "operator/redis", "": ""} {
		pw := ""
		if file != "" {
			pw = read(file)
		}
		rdb := redis.NewClient(&redis.Options{Addr: rs.Addr(), Username: user, Password: pw, MaxRetries: -1, DisableIdentity: true})
		err := rdb.Set(ctx, "agentfy:compose:session:probe", "1", time.Second).Err() // a key both users may write
		_ = rdb.Close()
		if (user == "") != (err != nil) {
			t.Fatalf("redis SET as %q: %v", user, err)
		}
	}

	srv := testenv.NATS(t, natsserver.Options{Name: "secrets-test", Config: read("nats/nats-server.conf")})
	ns, _ := bus.NewNamespace("compose", 0)
	for _, role := range bus.Roles {
		nc, err := bus.Connect(bus.Config{Servers: []string{srv.ClientURL()}, User: role.User(), Password: read(string(role) + "/nats"), InboxPrefix: ns.InboxPrefix(role)}, testenv.Logger(t))
		if err != nil {
			t.Fatalf("nats as %s: %v", role, err)
		}
		nc.Close()
	}
	if nc, err := bus.Connect(bus.Config{Servers: []string{srv.ClientURL()}}, testenv.Logger(t)); err == nil {
		nc.Close()
		t.Fatal("nats accepted a client without a credential")
	}
}
