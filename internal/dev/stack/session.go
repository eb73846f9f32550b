package stack

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentfy/agentfy/broker"
	"github.com/agentfy/agentfy/broker/egress"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/channel"
	"github.com/agentfy/agentfy/internal/dev/servers"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/wire"
	"github.com/agentfy/agentfy/worker"
)

// SessionOptions configure StartSession.
type SessionOptions struct {
	// Replica is the index of the replica the worker attaches to.
	Replica int
	// Shell starts the worker without a broker and without an IPC directory: the shell
	// image, which cannot view (its hello lists no browserView).
	Shell bool
	// Broker overrides the broker's limits; nil means broker.DefaultConfig().
	Broker *broker.Config
	// ImageTag is stated in the worker's hello.
	ImageTag string
	// BrokerHandler, when set, serves the broker socket instead of a real broker (tests
	// that need a broker which holds or misbehaves).
	BrokerHandler http.Handler
	// BrokerProcess runs the broker as the Options.BrokerBin binary in a process of its
	// own (fault tests kill it); otherwise it runs in this process.
	BrokerProcess bool
	// BrowserAllow are more addresses the agent's browser may reach besides the demo
	// site (egress.Parse's entries, as AGENTFY_BROWSER_ALLOW takes them): a test's own
	// page on loopback.
	BrowserAllow []string
	// BrokerEnv is more environment for the broker process of BrokerProcess (for
	// example AGENTFY_METRICS_ADDR, which serves its metrics).
	BrokerEnv []string
	// BrokerLater starts the worker without its broker, as when the worker's container
	// comes up first: StartSession returns once the worker's hello was accepted, and the
	// test starts the broker with Session.StartBroker when it chooses.
	BrokerLater bool
	// BrokerAPIURLs are the API base URLs the broker redeems through, tried in turn;
	// empty means the stack's load balancer alone (Stack.LB).
	BrokerAPIURLs []string
	// CuttableLink puts a TCP proxy between the worker and its replica, which CutLink
	// cuts (the worker then reconnects through it).
	CuttableLink bool
	// LinkOnly gives the worker no other way to the API than the cuttable link (it
	// implies CuttableLink), so that SetLinkDown keeps it away from every replica.
	LinkOnly bool
}

// Session is a started worker session with its broker (own Chromium) and worker.
type Session struct {
	session.Session
	Passes   session.Passes
	IPCDir   string
	Chromium *broker.Chromium
	Broker   *broker.Broker

	stack      *Stack
	brokerOpts SessionOptions
	brokerProc *exec.Cmd       // with Options.BrokerBin
	brokerLog  *servers.Buffer // the broker process's stderr
	brokerDone chan struct{}   // closed when brokerProc exits
	link       *link
	worker     *worker.Worker
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
	// With CuttableLink its own replica is reached through a proxy a test can cut.
	s.mu.Lock()
	var apiURLs []string
	for i := range s.Replicas {
		if r := s.Replicas[(o.Replica+i)%len(s.Replicas)]; r != nil {
			apiURLs = append(apiURLs, r.URL)
		}
	}
	if o.CuttableLink || o.LinkOnly {
		if ss.link, err = newLink(ctx, strings.TrimPrefix(apiURLs[0], "http://")); err != nil {
			s.mu.Unlock()
			return nil, err
		}
		apiURLs[0] = "http://" + ss.link.addr
		if o.LinkOnly {
			apiURLs = apiURLs[:1]
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
		ss.brokerOpts = o
		if !o.BrokerLater {
			if err := ss.StartBroker(ctx); err != nil {
				return nil, err
			}
		}
	}

	tag := o.ImageTag
	if tag == "" {
		tag = "browser-worker:dev"
	}
	// The shell image has no IPC directory: that, not a missing socket, is what makes a
	// worker refuse views as unsupported.
	workerIPC := ss.IPCDir
	if o.Shell {
		workerIPC = ""
	}
	w, err := worker.New(worker.Config{
		APIURLs: apiURLs, Pass: passes.Worker, IPCDir: workerIPC, ImageTag: tag, Log: log.With().Str("component", "worker").Logger(),
		Tracer: s.workerTraces.TracerProvider(),
	})
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ss.worker, ss.stopWorker, ss.workerDone = w, cancel, make(chan error, 1)
	go func() { ss.workerDone <- w.Run(wctx) }()
	if err := ss.WaitAttached(ctx, s.Replicas[o.Replica].ID); err != nil {
		return nil, err
	}
	return ss, nil
}

// StartBroker starts the session's broker: in-process with its own Chromium, or as an
// agentfy-broker process with Options.BrokerBin. It returns once the broker's socket
// accepts connections. It starts the broker of a session started with BrokerLater, and
// starts a broker again after KillBroker, on the same IPC directory.
func (ss *Session) StartBroker(ctx context.Context) error {
	s, o := ss.stack, ss.brokerOpts
	log := s.opts.Log.With().Str("session", ss.ID).Str("component", "broker").Logger()
	if o.BrokerProcess {
		if s.opts.BrokerBin == "" {
			return errors.New("stack: BrokerProcess needs Options.BrokerBin")
		}
		return ss.startBrokerProcess(ctx)
	}
	var err error
	// The demo site is on loopback, which the agent's browser may not reach unless
	// allowed; the stack's replicas, NATS and Redis stay refused, to the tools and to
	// the pages alike.
	policy, err := egress.Parse(ss.browserAllow())
	if err != nil {
		return err
	}
	if ss.Chromium, err = broker.LaunchChromium(ctx, broker.LaunchConfig{Bin: s.opts.Chromium, Leakless: true, Egress: policy}, log); err != nil {
		return err
	}
	tp := s.brokerTraces.TracerProvider()
	consume, err := broker.NewFailoverConsumeClient(&http.Client{Transport: broker.ConsumeTransport(tp, http.DefaultTransport)}, ss.brokerAPIURLs(), ss.Passes.Broker)
	if err != nil {
		return err
	}
	cfg := broker.DefaultConfig()
	if o.Broker != nil {
		cfg = *o.Broker
	}
	for _, entry := range strings.Split(ss.browserAllow(), ",") {
		if cfg.Egress, err = cfg.Egress.Allow(entry); err != nil {
			return err
		}
	}
	cfg.Tracer = tp
	if ss.Broker, err = broker.New(ctx, ss.Chromium.Browser, consume, cfg, log, broker.SystemClock{}); err != nil {
		return err
	}
	ln, err := broker.Listen(ctx, ss.IPCDir)
	if err != nil {
		return err
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
	return nil
}

// siteAddr is the demo site's host:port, the one loopback address the agent's browser
// may reach (broker.Config.Egress).
func (s *Stack) siteAddr() string { return strings.TrimPrefix(s.Site, "http://") }

// browserAllow is the session's AGENTFY_BROWSER_ALLOW: the demo site and
// SessionOptions.BrowserAllow.
func (ss *Session) browserAllow() string {
	return strings.Join(append([]string{ss.stack.siteAddr()}, ss.brokerOpts.BrowserAllow...), ",")
}

// brokerAPIURLs are the URLs the session's broker redeems through.
func (ss *Session) brokerAPIURLs() []string {
	if len(ss.brokerOpts.BrokerAPIURLs) > 0 {
		return ss.brokerOpts.BrokerAPIURLs
	}
	return []string{ss.stack.LB}
}

// startBrokerProcess runs the agentfy-broker binary with the session's broker pass in a
// private file, and waits for its socket.
func (ss *Session) startBrokerProcess(ctx context.Context) error {
	s := ss.stack
	passDir, err := os.MkdirTemp("", "agentfy-broker-pass-")
	if err != nil {
		return err
	}
	passFile := filepath.Join(passDir, "pass")
	if err := os.WriteFile(passFile, []byte(ss.Passes.Broker), 0o600); err != nil {
		return err
	}
	chromium := s.opts.Chromium
	if chromium == "" {
		chromium = broker.DefaultChromium
	}
	cmd := exec.Command(s.opts.BrokerBin) //nolint:gosec,noctx // the test's own broker build; it outlives ctx
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir(), "TMPDIR=" + os.TempDir(),
		"AGENTFY_API_URL=" + strings.Join(ss.brokerAPIURLs(), ","), "AGENTFY_BROKER_PASS_FILE=" + passFile,
		"AGENTFY_IPC_DIR=" + ss.IPCDir, "AGENTFY_CHROMIUM=" + chromium, "AGENTFY_LOG_LEVEL=debug",
		"AGENTFY_BROWSER_ALLOW=" + ss.browserAllow(),
	}
	cmd.Env = append(cmd.Env, ss.brokerOpts.BrokerEnv...)
	if s.opts.Traces != nil {
		// The process's traces go where the stack's do.
		for _, name := range telemetry.Variables() {
			if v := s.opts.Traces(name); v != "" {
				cmd.Env = append(cmd.Env, name+"="+v)
			}
		}
	}
	ss.brokerLog = &servers.Buffer{}
	cmd.Stdout, cmd.Stderr = ss.brokerLog, ss.brokerLog
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(passDir)
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = os.RemoveAll(passDir); close(done) }()
	ss.brokerProc, ss.brokerDone = cmd, done
	ss.stopBroker = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	sock := filepath.Join(ss.IPCDir, wire.SocketName)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if c, err := (&net.Dialer{}).DialContext(ctx, "unix", sock); err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return errors.New("stack: broker process exited: " + ss.brokerLog.String())
		case <-t.C:
		}
	}
}

// SetBrokerEnv replaces the extra environment of the session's broker process
// (SessionOptions.BrokerEnv) for its next StartBroker.
func (ss *Session) SetBrokerEnv(env []string) { ss.brokerOpts.BrokerEnv = env }

// BrokerEnv is the extra environment of the session's broker process.
func (ss *Session) BrokerEnv() []string { return slices.Clone(ss.brokerOpts.BrokerEnv) }

// KillBroker kills the broker process with SIGKILL, as a crash would (the parent-death
// signal LaunchConfig.Leakless asks for then ends its Chromium), and waits for it to
// exit.
func (ss *Session) KillBroker() {
	if ss.brokerProc == nil {
		return
	}
	_ = ss.brokerProc.Process.Kill()
	<-ss.brokerDone
	ss.brokerProc = nil
}

// BrokerPID is the broker process's id (0 for an in-process broker).
func (ss *Session) BrokerPID() int {
	if ss.brokerProc == nil {
		return 0
	}
	return ss.brokerProc.Process.Pid
}

// BrokerExited is closed when the broker process exits.
func (ss *Session) BrokerExited() <-chan struct{} { return ss.brokerDone }

// BrokerLog is what the broker process wrote.
func (ss *Session) BrokerLog() string {
	if ss.brokerLog == nil {
		return ""
	}
	return ss.brokerLog.String()
}

// EndWorker has the worker end its session, as a worker whose work is done does, and
// waits until it has (Run returned).
func (ss *Session) EndWorker(ctx context.Context) error {
	ss.worker.EndSession()
	select {
	case err := <-ss.workerDone:
		ss.workerDone <- err // Close reads it again
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SetLinkDown takes the worker's link down (every connection cut, new ones refused) or
// brings it back up, as a network path that fails for a while.
func (ss *Session) SetLinkDown(down bool) {
	if ss.link != nil {
		ss.link.setDown(down)
	}
}

// CutLink drops every connection between the worker and its replica.
func (ss *Session) CutLink() {
	if ss.link != nil {
		ss.link.cut()
	}
}

// WaitAttached waits until the session's owner in Redis is replicaID (any replica for
// "") and the owner's subscription is visible from the harness's NATS server (on a
// cluster, interest takes a moment to travel the routes). The probe is the view
// subject's ping, an empty request the owner answers empty without touching the worker.
func (ss *Session) WaitAttached(ctx context.Context, replicaID string) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	subject, err := ss.stack.NS.Subject(bus.VerbView, ss.ID)
	if err != nil {
		return err
	}
	for {
		cur, err := ss.stack.Sess.Get(ctx, ss.ID)
		if err == nil && cur.Owner != "" && (replicaID == "" || cur.Owner == replicaID) {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			reply, err := bus.Request(pctx, ss.stack.Bus, subject, nil)
			cancel()
			if err == nil && len(reply) == 0 {
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

// Tool runs a tool call through NATS with the operator's credential, as the CLI and the
// demo agent do.
func (ss *Session) Tool(ctx context.Context, name string, args any) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cur, err := ss.stack.Sess.Get(ctx, ss.ID)
	if err != nil {
		return nil, err
	}
	return channel.CallTool(ctx, ss.stack.Operator, ss.stack.NS, cur, name, args)
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
		if ss.link != nil {
			ss.link.close()
		}
		if ss.IPCDir != "" {
			_ = os.RemoveAll(ss.IPCDir)
		}
	})
}
