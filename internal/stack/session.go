package stack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/agentfy/agentfy/broker"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/channel"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/worker"
)

// SessionOptions configure StartSession.
type SessionOptions struct {
	// Replica is the index of the replica the worker attaches to.
	Replica int
	// Shell starts the worker without a broker: the shell image, which cannot view.
	Shell bool
	// Broker overrides the broker's limits; nil means broker.DefaultConfig().
	Broker *broker.Config
	// ImageTag is stated in the worker's hello.
	ImageTag string
	// BrokerHandler, when set, serves the broker socket instead of a real broker (tests
	// that need a broker which holds or misbehaves).
	BrokerHandler http.Handler
}

// Session is a started worker session with its broker (own Chromium) and worker.
type Session struct {
	session.Session
	Passes   session.Passes
	IPCDir   string
	Chromium *broker.Chromium
	Broker   *broker.Broker

	stack      *Stack
	stopWorker context.CancelFunc
	workerDone chan error
	stopBroker func()
	once       sync.Once
}

// StartSession starts a session for agentID like the operator command does, then its
// broker (unless Shell) and worker, and waits until the worker is attached.
func (s *Stack) StartSession(ctx context.Context, agentID string, o SessionOptions) (_ *Session, err error) {
	sess, passes, err := s.Sess.Start(ctx, agentID)
	if err != nil {
		return nil, err
	}
	ss := &Session{Session: sess, Passes: passes, stack: s, stopBroker: func() {}}
	defer func() {
		if err != nil {
			ss.Close()
		}
	}()
	if ss.IPCDir, err = os.MkdirTemp("", "agentfy-ipc-"); err != nil {
		return nil, err
	}
	// The worker knows every replica, its own first: when that one goes away it moves on.
	s.mu.Lock()
	var apiURLs []string
	for i := range s.Replicas {
		if r := s.Replicas[(o.Replica+i)%len(s.Replicas)]; r != nil {
			apiURLs = append(apiURLs, r.URL)
		}
	}
	s.sessions = append(s.sessions, ss)
	s.mu.Unlock()
	log := s.opts.Log.With().Str("session", sess.ID).Logger()

	if o.BrokerHandler != nil {
		ln, err := broker.Listen(ctx, ss.IPCDir)
		if err != nil {
			return nil, err
		}
		srv := &http.Server{Handler: o.BrokerHandler, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		ss.stopBroker = func() { _ = srv.Close() }
	} else if !o.Shell {
		if ss.Chromium, err = broker.LaunchChromium(ctx, broker.LaunchConfig{Bin: s.opts.Chromium, Leakless: true, Env: []string{"HOME=" + os.TempDir()}}, log); err != nil {
			return nil, err
		}
		consume, err := broker.NewConsumeClient(&http.Client{}, s.LB, passes.Broker)
		if err != nil {
			return nil, err
		}
		cfg := broker.DefaultConfig()
		if o.Broker != nil {
			cfg = *o.Broker
		}
		if ss.Broker, err = broker.New(ctx, ss.Chromium.Browser, consume, cfg, log.With().Str("component", "broker").Logger(), broker.SystemClock{}); err != nil {
			return nil, err
		}
		ln, err := broker.Listen(ctx, ss.IPCDir)
		if err != nil {
			return nil, err
		}
		srv := &http.Server{Handler: ss.Broker.Handler(), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		stopCtx := context.WithoutCancel(ctx)
		ss.stopBroker = func() {
			_ = srv.Close()
			ss.Broker.Shutdown()
			cctx, cancel := context.WithTimeout(stopCtx, 10*time.Second)
			defer cancel()
			_ = ss.Chromium.Close(cctx)
		}
	}

	tag := o.ImageTag
	if tag == "" {
		tag = "browser-worker:dev"
	}
	w, err := worker.New(worker.Config{APIURLs: apiURLs, Pass: passes.Worker, IPCDir: ss.IPCDir, ImageTag: tag, Log: log.With().Str("component", "worker").Logger()})
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ss.stopWorker, ss.workerDone = cancel, make(chan error, 1)
	go func() { ss.workerDone <- w.Run(wctx) }()
	if err := ss.WaitAttached(ctx, s.Replicas[o.Replica].ID); err != nil {
		return nil, err
	}
	return ss, nil
}

// WaitAttached waits until the session's owner in Redis is replicaID and the owner's
// subscription is visible from the harness's NATS server (on a cluster, interest takes
// a moment to travel the routes). The probe is a view request with a malformed id,
// which the owner refuses at once without touching the worker.
func (ss *Session) WaitAttached(ctx context.Context, replicaID string) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	subject, err := ss.stack.NS.Subject(bus.VerbView, ss.ID)
	if err != nil {
		return err
	}
	for {
		cur, err := ss.stack.Sess.Get(ctx, ss.ID)
		if err == nil && cur.Owner == replicaID {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := bus.Request(pctx, ss.stack.Bus, subject, []byte("probe"))
			cancel()
			var re *bus.RemoteError
			if errors.As(err, &re) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Tool runs a tool call through NATS, as the CLI and the demo agent do.
func (ss *Session) Tool(ctx context.Context, name string, args any) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return channel.CallTool(ctx, ss.stack.Bus, ss.stack.NS, ss.ID, name, args)
}

// Stop stops the session like the operator command does (the worker is told by its
// replica and exits).
func (ss *Session) Stop(ctx context.Context) error {
	_, err := ss.stack.Sess.Stop(ctx, ss.ID, "operator")
	return err
}

// StopWorker ends the worker process (its socket drops).
func (ss *Session) StopWorker() {
	if ss.stopWorker != nil {
		ss.stopWorker()
		if err := <-ss.workerDone; err != nil && !errors.Is(err, worker.ErrSessionEnded) {
			ss.stack.opts.Log.Warn().Err(err).Msg("worker ended")
		}
		ss.stopWorker = nil
	}
}

// Close stops the worker and the broker and removes the IPC directory.
func (ss *Session) Close() {
	ss.once.Do(func() {
		ss.StopWorker()
		ss.stopBroker()
		if ss.IPCDir != "" {
			_ = os.RemoveAll(ss.IPCDir)
		}
	})
}
