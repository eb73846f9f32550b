// Package operator is what the operator's commands share — the operator CLI
// (cmd/agentfy) and the development one (cmd/agentfy-dev): the stores they work on and
// the bus they call tools over, each with the operator's credentials, and the health
// check of the container images.
package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/cmd/internal/apiconf"
	"github.com/agentfy/agentfy/cmd/internal/conf"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/redisclient"
	"github.com/agentfy/agentfy/session"
)

// pingTimeout bounds the first Redis round trip of a command.
const pingTimeout = 5 * time.Second

// Stores are what the operator's commands work on.
type Stores struct {
	RDB      redis.UniversalClient
	Dir      *directory.Store
	Creds    *auth.Store
	Sessions *session.Store
}

// OpenStores connects to the configured Redis as the operator and opens the stores.
func OpenStores(ctx context.Context) (*Stores, error) {
	ro, err := apiconf.Redis(nil)
	if err != nil {
		return nil, err
	}
	rdb := redisclient.New(ro)
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		CloseRedis(rdb)
		return nil, fmt.Errorf("redis: %w", err)
	}
	dep := conf.Deployment()
	creds := auth.NewStore(rdb, dep, nil)
	return &Stores{
		RDB: rdb, Dir: directory.NewStore(rdb, dep), Creds: creds,
		Sessions: session.NewStore(rdb, creds, dep, session.Policy{}, nil),
	}, nil
}

// CloseRedis closes a client, ignoring the error of an already closed one.
func CloseRedis(c redis.UniversalClient) { _ = c.Close() }

// Bus connects to NATS as the operator (the CLI's tool calls, the demo agent), in the
// namespace of the configured deployment and Redis database.
func Bus(name string, log zerolog.Logger) (*nats.Conn, bus.Namespace, error) {
	ro, err := apiconf.Redis(nil)
	if err != nil {
		return nil, bus.Namespace{}, err
	}
	ns, err := apiconf.Namespace(ro)
	if err != nil {
		return nil, bus.Namespace{}, err
	}
	ncfg, err := apiconf.NATS(name, ns, bus.RoleOperator, nil)
	if err != nil {
		return nil, bus.Namespace{}, err
	}
	nc, err := bus.Connect(ncfg, log)
	if err != nil {
		return nil, bus.Namespace{}, err
	}
	return nc, ns, nil
}

// Audit connects the operator's audit publisher (package audit) as the operator's NATS
// user, which may publish the admin changes' events, in the namespace of the
// configured deployment and Redis database.
func Audit(name string, log zerolog.Logger) (*audit.Publisher, error) {
	ro, err := apiconf.Redis(nil)
	if err != nil {
		return nil, err
	}
	ns, err := apiconf.Namespace(ro)
	if err != nil {
		return nil, err
	}
	ncfg, err := apiconf.NATS(name, ns, bus.RoleOperator, nil)
	if err != nil {
		return nil, err
	}
	bestEffort, err := apiconf.AuditBestEffort(func(w string) { log.Warn().Msg(w) })
	if err != nil {
		return nil, err
	}
	return audit.Connect(ncfg, ns, audit.Options{Replica: "cli", Source: audit.SourceOperatorCLI, BestEffort: bestEffort}, log)
}

// healthTimeout bounds a health check.
const healthTimeout = 5 * time.Second

// Health is a container health check for images without a shell: it succeeds when GET
// url answers 200 within healthTimeout.
func Health(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return errors.New("health: one URL")
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	// The URL is the operator's own argument (a container's health check).
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil) //nolint:gosec // see above
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req) //nolint:gosec // see above
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: %s answered %d", args[0], resp.StatusCode)
	}
	return nil
}
