package bus

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// Config says how to reach NATS. A cluster or supercluster is only a longer Servers list
// (or one URL of a load-balanced name): the client learns the other nodes from the server.
type Config struct {
	// Servers are nats:// or tls:// URLs; at least one.
	Servers []string
	// Name identifies the connection in the server's monitoring (e.g. the replica id).
	Name string
	// InboxPrefix is where replies to this connection's requests arrive; set it to
	// Namespace.InboxPrefix(role), which the server allows the role to subscribe to.
	// Empty means nats.go's _INBOX, outside every namespace (tests of the bus alone).
	InboxPrefix string

	// At most one of these credential kinds may be set.
	User, Password string
	Token          string
	NKeySeedFile   string
	CredsFile      string // a decentralised-auth .creds file (JWT + seed)

	// TLS: a CA to trust, and a client certificate for mutual TLS.
	TLSCAFile, TLSCertFile, TLSKeyFile string

	// AsyncError, when set, sees each asynchronous error of the connection first (a
	// publish the server refused, nats.ErrPermissionViolation); when it returns true
	// the error was handled and is not logged. Package audit counts its refused
	// publishes so. A function has no JSON form: a Config sent to another process (the
	// capacity bench's nodes) goes without it.
	AsyncError func(err error) bool `json:"-"`
	// WriteTimeout, when set, bounds each write to the server (nats.go's is a minute);
	// a write that takes longer fails and the connection reconnects.
	WriteTimeout time.Duration
	// NoReconnectBuffer makes a publish fail at once while the connection reconnects,
	// rather than wait in a buffer of ReconnectBufSize that is lost if the process
	// stops first: for traffic that counts what it could not send (package audit).
	NoReconnectBuffer bool
}

// Connection limits.
const (
	ConnectTimeout = 5 * time.Second
	ReconnectWait  = 250 * time.Millisecond
	// ReconnectBufSize bounds what is buffered while disconnected (then publishes fail
	// fast rather than grow without bound).
	ReconnectBufSize = 8 << 20 // 8 MiB
)

// Connect dials NATS and keeps reconnecting for as long as the connection lives. Errors
// and state changes are logged without credentials.
func Connect(cfg Config, log zerolog.Logger) (*nats.Conn, error) {
	if len(cfg.Servers) == 0 {
		return nil, errors.New("bus: no NATS servers configured")
	}
	kinds := 0
	for _, set := range []bool{cfg.User != "", cfg.Token != "", cfg.NKeySeedFile != "", cfg.CredsFile != ""} {
		if set {
			kinds++
		}
	}
	if kinds > 1 {
		return nil, errors.New("bus: configure one NATS credential kind (user, token, nkey or creds)")
	}
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.Timeout(ConnectTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(ReconnectWait),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.ReconnectBufSize(ReconnectBufSize),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			// A connection the process closes itself is no fault; one the server or the
			// network drops (it reconnects then) is, even when nats.go has no error for it.
			if nc.IsClosed() {
				log.Debug().Msg("nats connection closed")
				return
			}
			log.Warn().Err(err).Msg("nats disconnected")
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info().Str("server", nc.ConnectedServerId()).Msg("nats reconnected")
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if cfg.AsyncError != nil && cfg.AsyncError(err) {
				return
			}
			ev := log.Warn().Err(err)
			if sub != nil {
				ev = ev.Str("subject", sub.Subject)
			}
			ev.Msg("nats async error")
		}),
	}
	if cfg.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(cfg.InboxPrefix))
	}
	if cfg.WriteTimeout > 0 {
		opts = append(opts, nats.FlusherTimeout(cfg.WriteTimeout))
	}
	if cfg.NoReconnectBuffer {
		opts = append(opts, nats.ReconnectBufSize(-1))
	}
	switch {
	case cfg.User != "":
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	case cfg.Token != "":
		opts = append(opts, nats.Token(cfg.Token))
	case cfg.NKeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(cfg.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("bus: nkey seed: %w", err)
		}
		opts = append(opts, o)
	case cfg.CredsFile != "":
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.TLSCAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCAFile))
	}
	if cfg.TLSCertFile != "" || cfg.TLSKeyFile != "" {
		opts = append(opts, nats.ClientCert(cfg.TLSCertFile, cfg.TLSKeyFile))
	}
	nc, err := nats.Connect(strings.Join(cfg.Servers, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("bus: connect: %w", err)
	}
	return nc, nil
}

// MaxPayload is the largest NATS message a deployment's server must allow (the
// deployment template deploy/nats-server.conf.tmpl and the development stack's embedded
// server set it): a sealed frame of the largest JPEG the API accepts
// (wire.MaxSealedBytes, about 7.3 MiB) fits.
const MaxPayload = 8 << 20 // 8 MiB
