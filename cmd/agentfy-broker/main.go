// Command agentfy-broker is the browser broker of one worker session: it owns
// a headless Chromium, serves the browser tools and read-only capture on
// $AGENTFY_IPC_DIR/browser.sock, and redeems capture request ids at the
// API with its broker pass.
//
// Configuration (environment; flags mirror all but the pass):
//
//	AGENTFY_API_URL            API replicas, comma separated, or a load balancer (required);
//	                           each redemption tries them in turn, moving on after a
//	                           connection error or a 5xx answer
//	AGENTFY_BROKER_PASS        the broker pass, or
//	AGENTFY_BROKER_PASS_FILE   a file holding it (one of the two is required)
//	AGENTFY_IPC_DIR            the IPC directory shared with the worker (required)
//	AGENTFY_CHROMIUM           Chromium executable (default /usr/bin/chromium)
//	AGENTFY_CHROMIUM_USER      the user a broker running as root starts Chromium as
//	                           (default agentfy-chromium): Chromium never runs as root
//	AGENTFY_CHROMIUM_SANDBOX   on (default) or off: Chromium's sandbox; a broker that cannot
//	                           start Chromium sandboxed refuses to start unless it is off
//	AGENTFY_BROWSER_ALLOW      loopback, private or link-local addresses, ranges or host:port
//	                           the agent's browser may open, comma separated (default none)
//	AGENTFY_BROKER_PROFILE_DIR parent of the private profile (default $TMPDIR)
//	AGENTFY_LOG_LEVEL          debug, info, warn or error (default info)
//	AGENTFY_METRICS_ADDR       serve Prometheus metrics (capture durations, frame sizes) on this TCP address
//	OTEL_*                     traces of the captures, off unless an OTLP endpoint or exporter is
//	                           set (docs/operating.md#traces); service.name agentfy-broker
//
// It logs JSON lines to stderr, never the pass, a URL, a title or a frame.
// SIGINT or SIGTERM stops it: the socket is closed and removed, Chromium is
// closed and its profile removed.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/agentfy/agentfy/broker"
	"github.com/agentfy/agentfy/cmd/internal/conf"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/wire"
)

// Server limits. Every tool call answers within ToolTimeout and every
// capture within CaptureTimeout, so writes get that and a margin.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeMargin       = 5 * time.Second
	idleTimeout       = 60 * time.Second
	maxHeaderBytes    = 16 << 10 // 16 KiB
	shutdownTimeout   = 10 * time.Second
	consumeIdleConns  = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Environ(), os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "agentfy-broker:", err)
		os.Exit(1)
	}
}

// run starts the broker and serves until ctx ends or Chromium exits.
func run(ctx context.Context, args []string, getenv func(string) string, environ []string, stderr io.Writer) error {
	cfg, err := loadConfig(args, getenv)
	if err != nil {
		return err
	}
	// The pass lives in cfg from here on; Chromium gets an environment of the
	// broker's making (broker.LaunchConfig.Env), and this process's copy is dropped.
	_ = os.Unsetenv(envPass)
	logger := conf.NewLogger(stderr, cfg.logLevel, getenv("AGENTFY_LOG_FORMAT"), "broker")
	if cfg.inlinePass {
		// Unsetenv does not reach the copy the kernel keeps: the pass stays readable in
		// /proc/<pid>/environ for the process's life.
		logger.Warn().Msg(envPass + " holds the pass inline, where /proc/<pid>/environ keeps it for the process's life; prefer " + envPassFile)
	}

	// Traces, when an OTEL_* endpoint or exporter is set (docs/operating.md#traces).
	traces, err := telemetry.Setup(ctx, telemetry.Config{Service: telemetry.ServiceBroker, Getenv: getenv})
	if err != nil {
		return err
	}
	defer func() {
		if err := traces.Shutdown(context.WithoutCancel(ctx)); err != nil {
			logger.Warn().Err(err).Msg("traces not all exported at shutdown")
		}
	}()
	consume, err := broker.NewFailoverConsumeClient(&http.Client{
		Transport: broker.ConsumeTransport(traces.TracerProvider(), &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			MaxIdleConnsPerHost: consumeIdleConns,
			IdleConnTimeout:     idleTimeout,
			TLSHandshakeTimeout: wire.BrokerConsumeTimeout,
		}),
	}, cfg.apiURLs, cfg.pass)
	if err != nil {
		return err
	}

	if cfg.noSandbox {
		logger.Warn().Msg("chromium runs without its sandbox (" + envChromiumSandbox + "=off): a renderer exploit on any page the agent opens gets the broker's rights, its pass and every tab")
	}
	launchCtx, cancelLaunch := context.WithTimeout(ctx, broker.DefaultLaunchTimeout)
	chromium, err := broker.LaunchChromium(launchCtx, broker.LaunchConfig{
		Bin:           cfg.chromium,
		ProfileParent: cfg.profileDir,
		Leakless:      true,
		// Chromium takes only its locale and time zone of this environment.
		Env:       environ,
		User:      cfg.chromiumUser,
		NoSandbox: cfg.noSandbox,
		// Every connection of the browser goes through the broker's proxy, which
		// refuses the deployment's addresses.
		Egress: cfg.egress,
	}, logger)
	cancelLaunch()
	if err != nil {
		return err
	}
	defer func() {
		// Stopping must not inherit the cancelled context of the signal.
		if err := chromium.Close(context.WithoutCancel(ctx)); err != nil {
			logger.Error().Err(err).Msg("stop chromium")
		}
	}()

	bcfg := broker.DefaultConfig()
	bcfg.NoMask, bcfg.MaskAttributes, bcfg.MaskClasses = cfg.mask.off, cfg.mask.attributes, cfg.mask.classes
	bcfg.ShowOpaqueFrames = cfg.mask.showFrames
	bcfg.Egress = cfg.egress
	bcfg.Tracer = traces.TracerProvider()
	if cfg.mask.off {
		logger.Warn().Msg("privacy masks are off (" + envMask + "=off): viewers see secret fields and private regions as they are")
	}
	if addr := getenv(envMetricsAddr); addr != "" {
		m := newCaptureMetrics(!cfg.noSandbox)
		bcfg.OnCapture = m.record
		if err := m.serve(ctx, addr, logger); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	b, err := broker.New(ctx, chromium.Browser, consume, bcfg, logger, broker.SystemClock{})
	if err != nil {
		return err
	}
	defer b.Shutdown()

	ln, err := broker.Listen(ctx, cfg.ipcDir)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           b.Handler(),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      max(bcfg.ToolTimeout, bcfg.CaptureTimeout) + writeMargin,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          log.New(logger, "", 0),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Info().Str("socket", ln.Addr().String()).Msg("listening")

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info().Msg("stopping")
	case <-chromium.Exited():
		runErr = errors.New("chromium exited")
		logger.Error().Msg("chromium exited; stopping")
	case err := <-served:
		runErr = fmt.Errorf("serve: %w", err)
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	// Shutdown closes the listener, which removes the socket.
	if err := srv.Shutdown(shutdownCtx); err != nil {
		logger.Warn().Err(err).Msg("requests still running at shutdown")
		_ = srv.Close()
	}
	return runErr
}
