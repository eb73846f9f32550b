// Command agentfy-worker is the worker side of a session's tool channel. Configuration:
// AGENTFY_API_URL (comma-separated replicas or one load-balanced URL),
// AGENTFY_WORKER_PASS or AGENTFY_WORKER_PASS_FILE, AGENTFY_IPC_DIR (where the broker's
// browser.sock lives; set, the hello announces browserView whether or not the broker is
// up yet, and views answer broker_down until its socket accepts; absent in the shell
// image, which refuses views as unsupported), AGENTFY_IMAGE_TAG, and AGENTFY_HEALTH_FILE
// (a file that exists while the tool channel is open). Traces: the standard OTEL_*
// variables (docs/operating.md#traces), service.name agentfy-worker.
//
// `agentfy-worker healthcheck` is a container health check: it succeeds while that file
// exists.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/agentfy/agentfy/cmd/internal/conf"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/worker"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "healthcheck" {
		if _, err := os.Stat(os.Getenv("AGENTFY_HEALTH_FILE")); err != nil { //nolint:gosec // the operator's own path
			fmt.Fprintln(os.Stderr, "agentfy-worker: tool channel not open")
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil && !errors.Is(err, worker.ErrSessionEnded) {
		fmt.Fprintln(os.Stderr, "agentfy-worker:", err)
		os.Exit(1)
	}
}

func run() error {
	log := conf.Logger("worker")
	pass, err := conf.Secret("AGENTFY_WORKER_PASS", func(m string) { log.Warn().Msg(m) })
	if err != nil {
		return err
	}
	var urls []string
	for _, u := range strings.Split(conf.Env("AGENTFY_API_URL", "http://127.0.0.1:8080"), ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Traces, when an OTEL_* endpoint or exporter is set (docs/operating.md#traces).
	traces, err := telemetry.Setup(ctx, telemetry.Config{Service: telemetry.ServiceWorker})
	if err != nil {
		return err
	}
	defer func() {
		if err := traces.Shutdown(context.WithoutCancel(ctx)); err != nil {
			log.Warn().Err(err).Msg("traces not all exported at shutdown")
		}
	}()
	w, err := worker.New(worker.Config{
		APIURLs: urls, Pass: pass, IPCDir: os.Getenv("AGENTFY_IPC_DIR"),
		ImageTag: conf.Env("AGENTFY_IMAGE_TAG", "dev"), HealthFile: os.Getenv("AGENTFY_HEALTH_FILE"), Log: log,
		Tracer: traces.TracerProvider(),
	})
	if err != nil {
		return err
	}
	err = w.Run(ctx)
	if errors.Is(err, worker.ErrSessionEnded) {
		log.Info().Msg("session ended")
	}
	return err
}
