// Command agentfy-worker is the worker side of a session's tool channel. Configuration:
// AGENTFY_API_URL (comma-separated replicas or one load-balanced URL),
// AGENTFY_WORKER_PASS or AGENTFY_WORKER_PASS_FILE, AGENTFY_IPC_DIR (where the broker's
// browser.sock lives; absent in the shell image), AGENTFY_IMAGE_TAG.
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
	"github.com/agentfy/agentfy/worker"
)

func main() {
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
	w, err := worker.New(worker.Config{
		APIURLs: urls, Pass: pass, IPCDir: os.Getenv("AGENTFY_IPC_DIR"),
		ImageTag: conf.Env("AGENTFY_IMAGE_TAG", "dev"), Log: log,
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = w.Run(ctx)
	if errors.Is(err, worker.ErrSessionEnded) {
		log.Info().Msg("session ended")
	}
	return err
}
