// Package natsserver runs an in-process NATS server (nats-server/v2) on loopback for the
// development stack and the tests. It lives apart from package bus so that the binaries
// that only talk to NATS — the API replica — never link a server. Production runs a NATS
// cluster of its own (deploy/nats-server.conf.tmpl).
package natsserver

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/bus"
)

// ReadyTimeout bounds how long Run waits for the server to accept clients.
const ReadyTimeout = 10 * time.Second

// Options configures the server.
type Options struct {
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
	// JetStream, when set, enables JetStream (the audit trail's tests keep it in a
	// stream, as a platform does).
	JetStream *JetStream
	// Log, when set, receives the server's warnings and errors (a stream it could not
	// make says why only there); nil keeps the server quiet.
	Log *zerolog.Logger
}

// JetStream enables JetStream with its store in StoreDir for the configuration's
// account Account, and adds User (Password in clear) to that account with every right:
// a platform's own NATS user, which makes and reads streams. Production deployments
// configure their NATS system themselves (docs/operating.md, "Audit trail").
type JetStream struct {
	StoreDir, Account, User, Password string
}

// ServerOptions are the server options o describes.
func ServerOptions(o Options) (*server.Options, error) {
	opts := &server.Options{}
	if o.Config != "" {
		if err := opts.ProcessConfigString(o.Config); err != nil {
			return nil, fmt.Errorf("natsserver: config: %w", err)
		}
	}
	opts.ServerName, opts.Host, opts.Port = o.Name, "127.0.0.1", o.Port
	opts.NoLog, opts.NoSigs = true, true
	if opts.MaxPayload == 0 {
		opts.MaxPayload = bus.MaxPayload // unless the configuration says otherwise
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
				return nil, fmt.Errorf("natsserver: route %q: %w", r, err)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	if js := o.JetStream; js != nil {
		opts.JetStream, opts.StoreDir = true, js.StoreDir
		var acc *server.Account
		for _, a := range opts.Accounts {
			if a.Name == js.Account {
				acc = a
			}
		}
		if acc == nil {
			return nil, fmt.Errorf("natsserver: no account %q for JetStream", js.Account)
		}
		opts.Users = append(opts.Users, &server.User{Username: js.User, Password: js.Password, Account: acc})
	}
	return opts, nil
}

// Run starts a NATS server on loopback and waits until it accepts clients. Its
// max_payload is bus.MaxPayload unless the configuration says otherwise.
func Run(o Options) (*server.Server, error) {
	opts, err := ServerOptions(o)
	if err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsserver: %w", err)
	}
	if o.Log != nil {
		s.SetLoggerV2(serverLog{o.Log}, false, false, false)
	}
	go s.Start()
	if !s.ReadyForConnections(ReadyTimeout) {
		s.Shutdown()
		return nil, errors.New("natsserver: not ready")
	}
	if err := enableJetStream(s, o); err != nil {
		s.Shutdown()
		return nil, err
	}
	return s, nil
}

// Reload applies o, changed by edit, to the running server s (a user's permissions,
// say). o must name the ports s listens on.
func Reload(s *server.Server, o Options, edit func(*server.Options)) error {
	opts, err := ServerOptions(o)
	if err != nil {
		return err
	}
	if edit != nil {
		edit(opts)
	}
	if err := s.ReloadOptions(opts); err != nil {
		return fmt.Errorf("natsserver: reload: %w", err)
	}
	return enableJetStream(s, o)
}

// enableJetStream turns JetStream on for o's JetStream account, which a configuration
// without a jetstream block per account leaves off.
func enableJetStream(s *server.Server, o Options) error {
	if o.JetStream == nil {
		return nil
	}
	acc, err := s.LookupAccount(o.JetStream.Account)
	if err != nil {
		return fmt.Errorf("natsserver: JetStream account: %w", err)
	}
	if acc.JetStreamEnabled() {
		return nil
	}
	if err := acc.EnableJetStream(nil, nil); err != nil {
		return fmt.Errorf("natsserver: enable JetStream: %w", err)
	}
	return nil
}

// serverLog passes the server's warnings and errors to a zerolog logger; its notices,
// debug and trace lines are left out.
type serverLog struct{ log *zerolog.Logger }

func (l serverLog) Noticef(string, ...any) {}
func (l serverLog) Debugf(string, ...any)  {}
func (l serverLog) Tracef(string, ...any)  {}
func (l serverLog) Warnf(format string, v ...any) {
	l.log.Warn().Str("part", "nats-server").Msgf(format, v...)
}
func (l serverLog) Errorf(format string, v ...any) {
	l.log.Error().Str("part", "nats-server").Msgf(format, v...)
}
func (l serverLog) Fatalf(format string, v ...any) {
	l.log.Error().Str("part", "nats-server").Msgf(format, v...)
}
