// Package replica wires one API replica from plain values: Redis and NATS clients, the
// stores, the view service, the worker hub, the status feed and the HTTP edge. The
// binaries, the development stack and the integration tests all start replicas through it.
package replica

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/netutil"

	"github.com/agentfy/agentfy/api"
	"github.com/agentfy/agentfy/api/metrics"
	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/channel"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/feed"
	"github.com/agentfy/agentfy/internal/redisclient"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

// Options configure a replica.
type Options struct {
	ReplicaID  string
	Deployment string
	Redis      *redis.UniversalOptions
	NATS       bus.Config
	// JWT are the sources of human tokens: a token valid under any one passes (the
	// development stack takes its own HS256 tokens and a company's JWKS).
	JWT    []auth.JWTConfig
	Policy session.Policy
	// Tick: see channel.Config.
	Tick    time.Duration
	OpenAPI []byte
	WebApp  fs.FS
	Log     zerolog.Logger
	// DrainTimeout bounds graceful shutdown; 0 means 12 s (longer than a view's 9 s).
	DrainTimeout time.Duration
	// GrantKeys sign and check the view grants (view.GrantKeys); every
	// replica of a deployment must hold the same. Empty means derived from the Redis
	// password (view.DeriveGrantKey), which every replica shares and no other
	// role holds; a replica with neither does not start.
	GrantKeys view.GrantKeys
	// RedisAcks, when set, is how many replicas must acknowledge the gate's windows and
	// the grants' consumption (view.Acks). Nil means view.DefaultAcks for a
	// Cluster or Sentinel set and none for one server.
	RedisAcks *view.Acks
	// Views and Hub, when set, see the view service's and the worker hub's
	// configurations, the production collaborators in them, just before each is built,
	// and may wrap any of those: the development stack (internal/dev/stack) watches and
	// steers a running replica so, from outside the production packages. Nil in
	// production.
	Views func(*view.ServiceConfig)
	Hub   func(*channel.Config)
	// Tracer, when set, traces the replica's part of each view: its view routes, the
	// NATS request, the relay as the owner, the consume route
	// (internal/telemetry.Setup with ServiceAPI). Nil means tracing off.
	Tracer trace.TracerProvider
	// TrustedTraceSources: see api.Config. Empty means none.
	TrustedTraceSources telemetry.TrustedSources
	// AuditBestEffort publishes the audit trail unacknowledged on core NATS
	// (AGENTFY_AUDIT=best-effort), for a deployment without JetStream.
	AuditBestEffort bool
}

// replicated reports whether o describes a Cluster or a Sentinel set: deployments where
// a replica takes over from a failed master.
func replicated(o *redis.UniversalOptions) bool {
	return o.MasterName != "" || o.IsClusterMode || len(o.Addrs) > 1
}

// Replica is a wired API replica.
type Replica struct {
	opts     Options
	Redis    redis.UniversalClient
	NATS     *nats.Conn
	Sessions *session.Store
	Dir      *directory.Store
	Creds    *auth.Store
	Views    *view.Service
	Hub      *channel.Hub
	Feed     *feed.Feed
	Server   *api.Server
	JWT      *auth.Verifier
	// Metrics are the replica's Prometheus series, served by ServeMetrics only.
	Metrics *metrics.Registry
	// Audit publishes the audit trail (view decisions, admin changes) on a NATS
	// connection of its own.
	Audit *audit.Publisher

	stopVerifier context.CancelFunc // ends the verifier's JWKS refreshers
}

// New connects to Redis and NATS and wires the replica.
func New(ctx context.Context, o Options) (*Replica, error) {
	if o.DrainTimeout == 0 {
		o.DrainTimeout = 12 * time.Second
	}
	ns, err := bus.NewNamespace(o.Deployment, o.Redis.DB)
	if err != nil {
		return nil, err
	}
	// The verifier's JWKS refreshers live as long as the replica, not as long as ctx,
	// which may bound only the start.
	vctx, stopVerifier := context.WithCancel(context.WithoutCancel(ctx))
	verifier, err := auth.NewVerifier(vctx, o.Log, o.JWT...)
	if err != nil {
		stopVerifier()
		return nil, err
	}
	rdb := redisclient.New(o.Redis)
	dials := redisclient.CountDials(rdb)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		stopVerifier()
		_ = rdb.Close()
		return nil, fmt.Errorf("redis: %w", err)
	}
	// Replies to this replica's requests arrive inside its namespace, where its
	// permissions allow them.
	o.NATS.InboxPrefix = ns.InboxPrefix(bus.RoleReplica)
	if o.NATS.Name == "" {
		o.NATS.Name = "agentfy-api " + o.ReplicaID
	}
	nc, err := bus.Connect(o.NATS, o.Log)
	if err != nil {
		stopVerifier()
		_ = rdb.Close()
		return nil, err
	}
	// A frame larger than the server's max_payload would be dropped on its way back:
	// refuse to start on a server that cannot carry the largest one.
	if limit := nc.MaxPayload(); limit < wire.MaxSealedBytes {
		stopVerifier()
		nc.Close()
		_ = rdb.Close()
		return nil, fmt.Errorf("nats: the server's max_payload is %d bytes, a sealed frame may need %d: set max_payload: 8MB", limit, wire.MaxSealedBytes)
	}
	r := &Replica{opts: o, Redis: rdb, NATS: nc, JWT: verifier, stopVerifier: stopVerifier}
	auditOpts := audit.Options{Replica: o.ReplicaID, Source: audit.SourceAdminAPI, BestEffort: o.AuditBestEffort}
	if r.Audit, err = audit.Connect(o.NATS, ns, auditOpts, o.Log.With().Str("part", "audit").Logger()); err != nil {
		r.close(ctx)
		return nil, fmt.Errorf("audit: %w", err)
	}
	r.Creds = auth.NewStore(rdb, o.Deployment, nil)
	r.Dir = directory.NewStore(rdb, o.Deployment)
	r.Sessions = session.NewStore(rdb, r.Creds, o.Deployment, o.Policy, nil)
	acks := view.Acks{}
	if o.RedisAcks != nil {
		acks = *o.RedisAcks
	} else if replicated(o.Redis) {
		acks = view.DefaultAcks
	}
	grantKeys := o.GrantKeys
	if len(grantKeys) == 0 {
		if grantKeys, err = view.DeriveGrantKey(o.Redis.Password); err != nil {
			r.close(ctx)
			return nil, errors.New("replica: no grant key: set AGENTFY_CAPABILITY_KEY(_FILE), or a Redis password to derive it from")
		}
	}
	grants := view.NewGrants(rdb, o.Deployment, grantKeys, 0).WithAcks(acks)
	views := view.ServiceConfig{
		Redis: rdb, Gate: view.NewGate(rdb, o.Deployment, 0, 0).WithAcks(acks), Grants: grants, Sessions: r.Sessions, Directory: r.Dir, Creds: r.Creds,
		Requester: bus.NewClient(nc), Namespace: ns, Log: o.Log, Tracer: o.Tracer,
	}
	if o.Views != nil {
		o.Views(&views)
	}
	r.Views = view.NewService(views)
	if r.Feed, err = feed.New(nc, ns, r.Sessions, o.Log); err != nil {
		r.close(ctx)
		return nil, err
	}
	hub := channel.Config{
		ReplicaID: o.ReplicaID, Creds: r.Creds, Sessions: r.Sessions, Grants: grants, NATS: nc, Namespace: ns,
		Events: r.Feed, Log: o.Log, Tick: o.Tick, Tracer: o.Tracer,
	}
	if o.Hub != nil {
		o.Hub(&hub)
	}
	r.Hub = channel.NewHub(hub)
	m := api.NewMetrics(r.Views.InFlight, r.Hub.RelayWaiters, r.Hub.Conns, r.Feed.Listeners)
	r.Metrics = m
	m.WatchJWKS(verifier.JWKSStatus)
	m.WatchAudit(r.Audit)
	m.WatchPeers(r.Hub.InvalidMessages)
	m.WatchConnections(metrics.Connections{
		NATSConnected:  func() bool { return nc.Status() == nats.CONNECTED },
		NATSReconnects: func() uint64 { return nc.Stats().Reconnects },
		// The probe lives as long as the replica (vctx), not as long as a scrape: the
		// registry's collectors see no request context.
		RedisUp: func() bool {
			pctx, cancel := context.WithTimeout(vctx, metrics.RedisProbeTimeout)
			defer cancel()
			return rdb.Ping(pctx).Err() == nil
		},
		RedisDials: dials.Counts, RedisRoundTrips: dials.RoundTrips,
	})
	r.Server = api.New(api.Config{ //nolint:contextcheck // the linter reads api.traceRoute's context.WithValue(c.Request.Context(), …) as a new context; it is the request's own
		Log: o.Log, JWT: verifier, Creds: r.Creds, Dir: r.Dir, Sessions: r.Sessions, Views: r.Views,
		Grants: grants, Hub: r.Hub, Feed: r.Feed, Metrics: m, Audit: r.Audit, OpenAPI: o.OpenAPI, WebApp: o.WebApp,
		Ready: r.ready, Tracer: o.Tracer, TrustedTraceSources: o.TrustedTraceSources,
	})
	return r, nil
}

func (r *Replica) ready(ctx context.Context) error {
	if r.NATS.Status() != nats.CONNECTED {
		return errors.New("nats not connected")
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return r.Redis.Ping(ctx).Err()
}

// AuditFlushTimeout bounds how long a stopping replica waits for its buffered audit
// events to be published; what is left then is dropped and counted.
const AuditFlushTimeout = 2 * time.Second

// close closes the replica's clients; ctx is only for its values (the audit flush has
// its own deadline).
func (r *Replica) close(ctx context.Context) {
	r.stopVerifier()
	if r.Audit != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), AuditFlushTimeout)
		if err := r.Audit.Close(ctx); err != nil {
			r.opts.Log.Warn().Err(err).Uint64("dropped", r.Audit.Dropped()).Msg("audit events left unpublished at shutdown")
		}
		cancel()
	}
	if r.Feed != nil {
		r.Feed.Close()
	}
	r.NATS.Close()
	_ = r.Redis.Close()
}

// Limits of a replica's HTTP server. Long-lived answers (the status feed's server-sent
// events, the worker's WebSocket) lift the read deadline for themselves once the
// request is authenticated.
const (
	// HeaderTimeout bounds reading a request's headers.
	HeaderTimeout = 5 * time.Second
	// BodyTimeout bounds reading a whole request, body included (the only body is the
	// consume route's, under 1 KiB).
	BodyTimeout = 10 * time.Second
	// IdleTimeout closes a keep-alive connection that sends no next request.
	IdleTimeout = 2 * time.Minute
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes = 32 << 10 // 32 KiB
	// MaxConnections bounds the connections one replica serves at once; further
	// clients wait in the listen backlog.
	MaxConnections = 16384
)

// Serve serves HTTP on ln until ctx ends, then shuts down gracefully: it stops accepting,
// lets pending views finish (they are bounded by 9 s), closes worker sockets so the
// workers reconnect to another replica, and closes its clients.
func (r *Replica) Serve(ctx context.Context, ln net.Listener) error {
	ln = netutil.LimitListener(ln, MaxConnections)
	srv := &http.Server{
		Handler:           r.Server.Handler(),
		ReadHeaderTimeout: HeaderTimeout,
		ReadTimeout:       BodyTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		IdleTimeout:       IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	srv.RegisterOnShutdown(r.Server.Shutdown)
	hubCtx, stopHub := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHub()
	go r.Hub.Run(hubCtx)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		r.close(ctx)
		return err
	case <-ctx.Done():
	}
	r.opts.Log.Info().Msg("shutting down: draining pending views")
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.DrainTimeout)
	defer cancel()
	err := srv.Shutdown(dctx)
	stopHub()
	r.Hub.Close(dctx)
	_ = r.NATS.Drain()
	r.close(ctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Listeners are a replica's listeners: the public one, and beside it, each when the
// deployment configures it, the admin API's and the metrics'.
type Listeners struct {
	// Public serves the public routes, the worker's channel, health and the web app
	// (Serve). Required.
	Public net.Listener
	// Admin, when set, serves the admin API (ServeAdmin, AGENTFY_ADMIN_LISTEN).
	Admin net.Listener
	// Metrics, when set, serves /metrics (ServeMetrics, AGENTFY_METRICS_LISTEN).
	Metrics net.Listener
}

// ServeAll serves every listener of ls until ctx ends, or until one of them fails, which
// stops the others: a replica without its public listener is not serving, and one whose
// admin or metrics listener failed is not what the operator configured. It returns the
// public listener's error, or else the first of the others'.
func (r *Replica) ServeAll(ctx context.Context, ls Listeners) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var aside []chan error
	for _, side := range []struct {
		ln    net.Listener
		serve func(context.Context, net.Listener) error
	}{{ls.Admin, r.ServeAdmin}, {ls.Metrics, r.ServeMetrics}} {
		if side.ln == nil {
			continue
		}
		done := make(chan error, 1)
		go func() { done <- side.serve(ctx, side.ln); cancel() }()
		aside = append(aside, done)
	}
	err := r.Serve(ctx, ls.Public)
	cancel()
	for _, done := range aside {
		if aerr := <-done; err == nil {
			err = aerr
		}
	}
	return err
}
