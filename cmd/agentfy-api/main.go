// Command agentfy-api is one API replica: the view routes, the consume route, the worker
// tool channel, the status feed, health, metrics, the OpenAPI document and the web app.
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
	id := flag.String("replica-id", os.Getenv("AGENTFY_REPLICA_ID"), "replica `id` (AGENTFY_REPLICA_ID; default host name + random)")
	flag.Parse()
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
		Tracer: traces.TracerProvider(),
	})
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", *listen)
	if err != nil {
		return err
	}
	log.Info().Str("addr", ln.Addr().String()).Str("replica", *id).Msg("listening")
	if *adminListen == "" {
		return r.Serve(ctx, ln)
	}
	if *adminListen == *listen {
		return errors.New("AGENTFY_ADMIN_LISTEN: the admin API needs a listener of its own, not AGENTFY_LISTEN's")
	}
	adminLn, err := lc.Listen(ctx, "tcp", *adminListen)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("AGENTFY_ADMIN_LISTEN: %w", err)
	}
	log.Info().Str("addr", adminLn.Addr().String()).Msg("admin API listening")
	// One stops the other: a replica without its public listener is not serving, and
	// one whose admin listener failed is not what the operator configured.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	adminDone := make(chan error, 1)
	go func() { adminDone <- r.ServeAdmin(sctx, adminLn); cancel() }()
	err = r.Serve(sctx, ln)
	cancel()
	if aerr := <-adminDone; err == nil {
		err = aerr
	}
	return err
}
