// Command agentfy-api is one API replica: the view routes, the consume route, the worker
// tool channel, the status feed, health, the OpenAPI document and the web app on its
// public listener (AGENTFY_LISTEN); the admin API (AGENTFY_ADMIN_LISTEN) and the
// Prometheus metrics (AGENTFY_METRICS_LISTEN) each on a listener of its own, when set.
// Run several behind a load balancer; they share Redis and NATS.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/cmd/internal/apiconf"
	"github.com/agentfy/agentfy/cmd/internal/conf"
	"github.com/agentfy/agentfy/internal/replica"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/openapi"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/web"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "agentfy-api:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", conf.Env("AGENTFY_LISTEN", ":8080"), "HTTP listen `address` (AGENTFY_LISTEN)")
	adminListen := flag.String("admin-listen", os.Getenv("AGENTFY_ADMIN_LISTEN"), "the admin API's listen `address` (AGENTFY_ADMIN_LISTEN; off unless set: keep it off the public network)")
	metricsListen := flag.String("metrics-listen", os.Getenv("AGENTFY_METRICS_LISTEN"), "the Prometheus /metrics listen `address` (AGENTFY_METRICS_LISTEN; off unless set: keep it off the public network)")
	id := flag.String("replica-id", os.Getenv("AGENTFY_REPLICA_ID"), "replica `id` (AGENTFY_REPLICA_ID; default host name + random)")
	flag.Parse()
	// Each listener is a listener of its own: the public one must never serve the admin
	// API or the metrics.
	if sameAddress(*adminListen, *listen) {
		return errors.New("AGENTFY_ADMIN_LISTEN: the admin API needs a listener of its own, not AGENTFY_LISTEN's")
	}
	if sameAddress(*metricsListen, *listen) || sameAddress(*metricsListen, *adminListen) {
		return errors.New("AGENTFY_METRICS_LISTEN: the metrics need a listener of their own, not AGENTFY_LISTEN's or AGENTFY_ADMIN_LISTEN's")
	}
	log := conf.Logger("api")
	warn := func(msg string) { log.Warn().Msg(msg) }
	if *id == "" {
		host, _ := os.Hostname()
		b := make([]byte, 3)
		_, _ = rand.Read(b)
		*id = host + "-" + hex.EncodeToString(b)
	}
	ro, err := apiconf.Redis(warn)
	if err != nil {
		return err
	}
	ns, err := apiconf.Namespace(ro)
	if err != nil {
		return err
	}
	nc, err := apiconf.NATS("agentfy-api "+*id, ns, bus.RoleReplica, warn)
	if err != nil {
		return err
	}
	jwtCfg, err := apiconf.JWT(warn)
	if err != nil {
		return err
	}
	grantKeys, err := apiconf.GrantKeys(warn)
	if err != nil {
		return err
	}
	auditBestEffort, err := apiconf.AuditBestEffort(warn)
	if err != nil {
		return err
	}
	trustedTraces, err := apiconf.TrustedTraceSources()
	if err != nil {
		return err
	}
	var policy session.Policy
	if policy.IdleAfter, err = conf.Duration("AGENTFY_IDLE_AFTER", session.DefaultPolicy.IdleAfter); err != nil {
		return err
	}
	if policy.StopAfter, err = conf.Duration("AGENTFY_STOP_AFTER", session.DefaultPolicy.StopAfter); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Traces, when an OTEL_* endpoint or exporter is set (docs/operating.md#traces).
	traces, err := telemetry.Setup(ctx, telemetry.Config{Service: telemetry.ServiceAPI, Instance: *id})
	if err != nil {
		return err
	}
	defer func() {
		if err := traces.Shutdown(context.WithoutCancel(ctx)); err != nil {
			log.Warn().Err(err).Msg("traces not all exported at shutdown")
		}
	}()
	r, err := replica.New(ctx, replica.Options{
		ReplicaID: *id, Deployment: conf.Deployment(), Redis: ro, NATS: nc, JWT: []auth.JWTConfig{jwtCfg},
		Policy: policy, GrantKeys: grantKeys, OpenAPI: openapi.Document, WebApp: web.Files(), Log: log.With().Str("replica", *id).Logger(),
		Tracer: traces.TracerProvider(), TrustedTraceSources: trustedTraces, AuditBestEffort: auditBestEffort,
	})
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ls := replica.Listeners{}
	if ls.Public, err = lc.Listen(ctx, "tcp", *listen); err != nil {
		return err
	}
	log.Info().Str("addr", ls.Public.Addr().String()).Str("replica", *id).Msg("listening")
	if ls.Admin, err = listenAside(ctx, lc, "AGENTFY_ADMIN_LISTEN", *adminListen); err != nil {
		_ = ls.Public.Close()
		return err
	}
	if ls.Metrics, err = listenAside(ctx, lc, "AGENTFY_METRICS_LISTEN", *metricsListen); err != nil {
		_ = ls.Public.Close()
		if ls.Admin != nil {
			_ = ls.Admin.Close()
		}
		return err
	}
	for _, side := range []struct {
		ln   net.Listener
		what string
	}{{ls.Admin, "admin API listening"}, {ls.Metrics, "metrics listening"}} {
		if side.ln != nil {
			log.Info().Str("addr", side.ln.Addr().String()).Msg(side.what)
		}
	}
	return r.ServeAll(ctx, ls)
}

// listenAside listens on addr, the address of a listener beside the public one that
// env configures; nil when addr is empty (the listener is off).
func listenAside(ctx context.Context, lc net.ListenConfig, env, addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", env, err)
	}
	return ln, nil
}

// sameAddress reports whether a and b are one fixed listen address, which two listeners
// cannot share. Port 0 (any free port) never is.
func sameAddress(a, b string) bool {
	if a == "" || a != b {
		return false
	}
	_, port, err := net.SplitHostPort(a)
	return err == nil && port != "0"
}
