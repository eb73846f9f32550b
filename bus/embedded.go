package bus

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedReadyTimeout bounds how long RunEmbedded waits for the server to accept clients.
const EmbeddedReadyTimeout = 10 * time.Second

// EmbeddedOptions configures an in-process NATS server for the development stack and
// tests. Production runs a NATS cluster of its own.
type EmbeddedOptions struct {
	// Name is the server's name (unique within a cluster).
	Name string
	// Port for clients on 127.0.0.1; -1 picks a random free port.
	Port int
	// MonitorPort serves /varz and friends on 127.0.0.1 when > 0; -1 picks one; 0 disables.
	MonitorPort int
	// ClusterName, ClusterPort and Routes join the server to a cluster when ClusterName
	// is set. ClusterPort -1 picks a random port.
	ClusterName string
	ClusterPort int
	Routes      []string
	// Config is a NATS server configuration (deploy.NATSConfig: accounts, users and
	// their permissions) that the options above complete. Empty means no accounts and
	// no authentication, for tests of the bus alone.
	Config string
}

// MaxPayload is the largest NATS message the embedded server, and the deployment
// template (deploy/nats-server.conf.tmpl), allow: a sealed frame of the largest JPEG the
// API accepts (view.MaxSealedBytes, about 7.3 MiB) fits.
const MaxPayload = 8 << 20 // 8 MiB

// RunEmbedded starts a NATS server on loopback and waits until it accepts clients.
func RunEmbedded(o EmbeddedOptions) (*server.Server, error) {
	opts := &server.Options{}
	if o.Config != "" {
		if err := opts.ProcessConfigString(o.Config); err != nil {
			return nil, fmt.Errorf("bus: embedded server config: %w", err)
		}
	}
	opts.ServerName, opts.Host, opts.Port = o.Name, "127.0.0.1", o.Port
	opts.NoLog, opts.NoSigs = true, true
	if opts.MaxPayload == 0 {
		opts.MaxPayload = MaxPayload // unless the configuration says otherwise
	}
	if o.MonitorPort != 0 {
		opts.HTTPHost = "127.0.0.1"
		opts.HTTPPort = o.MonitorPort
	}
	if o.ClusterName != "" {
		opts.Cluster = server.ClusterOpts{Name: o.ClusterName, Host: "127.0.0.1", Port: o.ClusterPort}
		for _, r := range o.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return nil, fmt.Errorf("bus: route %q: %w", r, err)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("bus: embedded server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(EmbeddedReadyTimeout) {
		s.Shutdown()
		return nil, errors.New("bus: embedded server not ready")
	}
	return s, nil
}
