package testenv

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/internal/dev/natsserver"
)

// PlatformNATS is a NATS server run as a platform runs it for one deployment: the
// deployment's roles (deploy.NATSConfig) and JetStream, with a platform user that has
// every right in the deployment's account. No audit stream is made.
type PlatformNATS struct {
	// URL is the server's client URL.
	URL string
	// Secrets are the roles' passwords the server is configured with.
	Secrets deploy.Secrets
	// Platform is a connection as the platform user, closed at cleanup.
	Platform *nats.Conn
}

// StartPlatformNATS starts a PlatformNATS for ns with fresh secrets and its JetStream
// store in the test's temporary directory, and stops it when the test ends.
func StartPlatformNATS(tb testing.TB, ns bus.Namespace) PlatformNATS {
	tb.Helper()
	secrets, err := deploy.GenerateSecrets()
	if err != nil {
		tb.Fatal(err)
	}
	cfg, err := deploy.NATSConfig(ns, secrets)
	if err != nil {
		tb.Fatal(err)
	}
	js := &natsserver.JetStream{StoreDir: tb.TempDir(), Account: deploy.NATSAccount, User: "platform", Password: "platform-password"}
	s := NATS(tb, natsserver.Options{Config: cfg, JetStream: js})
	platform, err := bus.Connect(bus.Config{Servers: []string{s.ClientURL()}, Name: "platform", User: js.User, Password: js.Password}, Logger(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(platform.Close)
	return PlatformNATS{URL: s.ClientURL(), Secrets: secrets, Platform: platform}
}
