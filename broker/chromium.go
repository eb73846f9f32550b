package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/go-rod/rod"
	"github.com/go-rod/rod/lib/cdp"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/broker/egress"
)

// Chromium launch defaults.
const (
	// DefaultChromium is Debian's Chromium wrapper.
	DefaultChromium = "/usr/bin/chromium"
	// WindowSize gives a 1280×800 viewport in headless Chromium (the window
	// has chrome); every tab gets a window of this size.
	WindowSize = "1280,887"
	// DefaultLaunchTimeout bounds the start of Chromium up to its first answer
	// over the DevTools pipe.
	DefaultLaunchTimeout = 30 * time.Second
	// closeTimeout bounds each step of stopping Chromium.
	closeTimeout = 5 * time.Second
	// stderrKept is how much of the end of Chromium's standard error a failed
	// launch quotes.
	stderrKept = 2 << 10 // 2 KiB
	// stderrDrain bounds the read of Chromium's standard error after its exit.
	stderrDrain = 100 * time.Millisecond
	// noSandboxMessage is how Chromium says, on its standard error, that it cannot
	// build its sandbox, before it exits.
	noSandboxMessage = "No usable sandbox!"
)

// chromiumFlags are the switches of every launch, besides the binary, the
// profile directory and the DevTools pipe. There is no startup window: the
// broker starts with no tab, and every tab gets a window of its own.
//
// There is no no-sandbox: Chromium's renderers, which run the open internet's code,
// each run under a seccomp-bpf filter in user and PID namespaces of their own (Linux's
// namespace sandbox), unless an operator says LaunchConfig.NoSandbox.
var chromiumFlags = []string{
	"headless",
	"disable-gpu",
	"disable-background-networking",
	"disable-component-update",
	"disable-sync",
	"no-first-run",
	"no-startup-window",
	// Ask for no crash dumps: a renderer's memory holds what the page
	// shows. Debian's build starts its crash handler anyway; its database
	// is kept inside the profile (see the environment below).
	"disable-breakpad",
	"disable-crash-reporter",
	"disable-default-apps",
	"disable-dev-shm-usage",
	// Windows are never really occluded in headless, but the agent's pages
	// must keep running and painting whichever window was activated last.
	"disable-background-timer-throttling",
	"disable-backgrounding-occluded-windows",
	"disable-renderer-backgrounding",
	"force-color-profile=srgb",
	// A wheel step scrolls at once, as its result says, rather than
	// animating after the tool call returned.
	"disable-smooth-scrolling",
	// Animations run on the renderer's main thread, where the overlay that pins the
	// masks of a capture is painted from the frame's own layout (pins.go): on the
	// compositor's thread they would draw a moving secret a frame ahead of its mask
	// (leaks/compositor-transform.html).
	"disable-threaded-animation",
	"window-size=" + WindowSize,
}

// LaunchConfig says how to start Chromium.
type LaunchConfig struct {
	// Bin is the Chromium executable; empty means DefaultChromium. The broker
	// never downloads a browser.
	Bin string
	// ProfileParent is the directory in which a fresh private profile
	// directory is made; empty means the system temporary directory.
	ProfileParent string
	// Leakless kills Chromium when the broker dies without cleaning up (a
	// crash, SIGKILL): the kernel sends Chromium SIGKILL when its parent dies
	// (Linux's parent-death signal), and its renderers and helpers then lose
	// their browser and exit. Without it a Chromium that still runs exits
	// when its pipe closes with the broker, but a wedged one stays.
	Leakless bool
	// Env is where Chromium's locale and time zone come from: of it, Chromium
	// gets only the variables chromiumEnvNames names. The rest of its
	// environment is the broker's making (PATH, and HOME, the XDG directories
	// and TMPDIR inside the private profile), so no secret of the broker's
	// environment reaches Chromium's.
	Env []string
	// User is the account Chromium runs as when the broker runs as root: a
	// user name or a numeric uid; empty means DefaultChromiumUser. It must
	// exist, and be neither uid 0 nor of group 0: Chromium never runs as
	// root. A broker that is not root starts Chromium as itself, and User must
	// then be empty or its own.
	User string
	// Egress is where Chromium may connect: every connection of the browser —
	// a navigation, a redirect, a subresource, a script's fetch, a WebSocket —
	// goes through a proxy of the broker's (egress.Policy.Serve, on a loopback
	// port of its own) that dials only what the policy allows. Chromium makes
	// no connection of its own: no QUIC, no WebRTC over UDP, and loopback is
	// not exempt. The zero policy refuses every non-public address.
	Egress egress.Policy
	// NoSandbox starts Chromium without its sandbox (--no-sandbox): only when
	// an operator says so (AGENTFY_CHROMIUM_SANDBOX=off), never by default.
	NoSandbox bool
}

// Chromium is a running Chromium and the rod connection that controls it. The
// connection is a pair of pipes (--remote-debugging-pipe): Chromium opens no
// DevTools port and writes no DevToolsActivePort file, so no other process of the
// machine or the pod can reach its pages; only the broker, which holds the pipes.
type Chromium struct {
	// Browser is the rod connection, without default device emulation.
	Browser *rod.Browser

	pid     int      // Chromium's process, the leader of its own process group
	pipe    *cdpPipe // the DevTools connection
	profile string
	logger  zerolog.Logger
	cancel  context.CancelFunc // ends the connection's context
	// stopProxy stops the egress proxy, Chromium's only way out.
	stopProxy context.CancelFunc
	stderr    *tailBuffer   // the end of Chromium's standard error
	exited    chan struct{} // closed when the process has exited and its group is killed

	mu      sync.Mutex
	reaped  bool  // guarded by mu: Chromium's pid may be another process's now
	exitErr error // guarded by mu: how Chromium exited, once reaped
}

// LaunchChromium starts Chromium with a fresh private profile and connects to
// it over a pipe. ctx bounds the start only. The caller must Close the result.
func LaunchChromium(ctx context.Context, cfg LaunchConfig, logger zerolog.Logger) (_ *Chromium, err error) {
	bin := cfg.Bin
	if bin == "" {
		bin = DefaultChromium
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("launch chromium: %w", err)
	}
	runAs, err := resolveChromiumUser(cfg.User)
	if err != nil {
		return nil, fmt.Errorf("launch chromium: %w", err)
	}
	// A broker that crashed (or was killed) left its profile behind: clear those of
	// dead brokers before making a new one.
	if n := SweepProfiles(cfg.ProfileParent); n > 0 {
		logger.Info().Int("profiles", n).Msg("removed the profiles of dead brokers")
	}
	profile, err := os.MkdirTemp(cfg.ProfileParent, profilePrefix)
	if err != nil {
		return nil, fmt.Errorf("launch chromium: profile: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(profile)
		}
	}()
	if err := os.WriteFile(filepath.Join(profile, ownerFile), []byte(processIdentity(os.Getpid())), 0o600); err != nil {
		return nil, fmt.Errorf("launch chromium: profile owner: %w", err)
	}
	// Chromium hangs on a relative profile path.
	if profile, err = filepath.Abs(profile); err != nil {
		return nil, fmt.Errorf("launch chromium: profile: %w", err)
	}
	// The profile holds the owner file, the broker's, and Chromium's user data
	// directory, Chromium's user's: Chromium can neither forge its owner nor read
	// anything else the broker keeps.
	data, err := makeUserData(profile, runAs)
	if err != nil {
		return nil, fmt.Errorf("launch chromium: profile: %w", err)
	}

	args := make([]string, 0, len(chromiumFlags)+3)
	args = append(args, "--remote-debugging-pipe", "--user-data-dir="+data)
	for _, f := range chromiumFlags {
		args = append(args, "--"+f)
	}
	if cfg.NoSandbox {
		args = append(args, "--no-sandbox")
	}
	// The browser's only way out: the broker's proxy, which stops with Chromium.
	proxyCtx, stopProxy := context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		if err != nil {
			stopProxy()
		}
	}()
	proxyAddr, err := startProxy(proxyCtx, cfg.Egress, logger)
	if err != nil {
		return nil, fmt.Errorf("launch chromium: egress proxy: %w", err)
	}
	args = append(args, proxyFlags(proxyAddr)...)
	// Chromium outlives the launch context; Close and kill end it.
	cmd := exec.CommandContext(context.WithoutCancel(ctx), bin, args...) //nolint:gosec // the operator's Chromium binary and the broker's own flags
	// An environment of the broker's making, never empty, which matters: exec
	// passes a nil environment on as "inherit ours".
	cmd.Env = chromiumEnv(cfg.Env, data, chromiumTempDir(data))
	// Its own process group, so that stopping it ends its renderers and helpers
	// too; as its own user when the broker is root. The parent-death signal
	// survives the switch: Go sets it after the credentials.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: runAs.credential()}
	if cfg.Leakless {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	c := &Chromium{profile: profile, logger: logger, stderr: &tailBuffer{max: stderrKept}, exited: make(chan struct{}), stopProxy: stopProxy}

	// Chromium reads commands from its descriptor 3 and writes to its 4
	// (ExtraFiles start at 3). The pipes are the broker's alone: os.Pipe makes
	// them close-on-exec, and Chromium hands them on to none of its children.
	// Its standard error goes to a pipe of its own too, not through exec's
	// copying, whose Wait would wait for Chromium's crash handlers: they hold it,
	// outside the process group, until they notice Chromium is gone.
	pipes := make([]*os.File, 0, 6) // inR, inW, outR, outW, errR, errW
	for range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			for _, f := range pipes {
				_ = f.Close()
			}
			return nil, fmt.Errorf("launch chromium: pipe: %w", err)
		}
		pipes = append(pipes, r, w)
	}
	inR, inW, outR, outW, errR, errW := pipes[0], pipes[1], pipes[2], pipes[3], pipes[4], pipes[5]
	cmd.ExtraFiles = []*os.File{inR, outW}
	cmd.Stderr = errW
	c.pipe = newCDPPipe(inW, outR)

	started := make(chan error, 1)
	go c.run(cmd, errR, started)
	err = <-started
	// Chromium's ends are Chromium's now: once it exits, the broker reads the end
	// of its output.
	_, _, _ = inR.Close(), outW.Close(), errW.Close()
	if err != nil {
		_ = c.pipe.Close()
		return nil, fmt.Errorf("launch chromium: %w", err)
	}
	c.pid = cmd.Process.Pid

	// The connection and rod's event loop outlive the launch context; Close
	// ends them. Until Chromium has answered, the launch context bounds the
	// start: at its end Chromium is killed and the pipe closed, which fails the
	// call under way.
	connCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	stopWatch := context.AfterFunc(ctx, func() {
		c.kill()
		_ = c.pipe.Close()
	})
	b := rod.New().Client(cdp.New().Start(c.pipe)).NoDefaultDevice().Context(connCtx)
	err = b.Connect()
	if !stopWatch() && err == nil {
		err = ctx.Err() // Chromium answered as the launch ran out of time
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		c.kill()
		_ = c.stop()
		if strings.Contains(c.stderr.String(), noSandboxMessage) {
			return nil, fmt.Errorf("connect chromium: %w", noSandboxError())
		}
		return nil, fmt.Errorf("connect chromium: %w%s", err, c.exitReport())
	}
	c.Browser = b
	logger.Info().Int("pid", c.pid).Uint32("uid", runAs.uid).Bool("sandbox", !cfg.NoSandbox).Msg("chromium started")
	return c, nil
}

// proxyFlags send every connection of Chromium through the proxy at addr: loopback is
// not exempt (Chromium's implicit bypass), QUIC is off, and WebRTC may not send UDP
// past the proxy.
func proxyFlags(addr string) []string {
	return []string{
		"--proxy-server=http://" + addr,
		"--proxy-bypass-list=<-loopback>",
		"--disable-quic",
		"--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
	}
}

// startProxy serves the egress proxy on a loopback port until ctx ends, and returns
// its address.
func startProxy(ctx context.Context, policy egress.Policy, logger zerolog.Logger) (string, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() {
		if err := policy.Serve(ctx, ln); err != nil {
			logger.Error().Err(err).Msg("egress proxy stopped")
		}
	}()
	return ln.Addr().String(), nil
}

// makeUserData makes Chromium's user data directory inside profile, and the directory
// of its temporary files inside that, both owned by u. profile stays the broker's: when
// Chromium runs as another user, that user may pass through it (mode 0711) but not list
// it or write in it.
func makeUserData(profile string, u chromiumUser) (string, error) {
	if err := u.checkReachable(filepath.Dir(profile)); err != nil {
		return "", err
	}
	data := filepath.Join(profile, userDataDir)
	for _, dir := range []string{data, filepath.Join(data, tempDir)} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return "", err
		}
		if u.switched {
			if err := os.Chown(dir, int(u.uid), int(u.gid)); err != nil {
				return "", err
			}
		}
	}
	if u.switched {
		if err := os.Chmod(profile, 0o711); err != nil { //nolint:gosec // searchable only, for Chromium's user to reach its directory
			return "", err
		}
	}
	return data, nil
}

// run starts Chromium and waits for it to exit; it sends the start's error on
// started, and keeps the end of what Chromium writes to stderr. Linux sends the
// parent-death signal (LaunchConfig.Leakless) when the thread that forked the
// child ends, not its process (go.dev/issue/27505), and Go ends a thread whose
// goroutine exits while locked to it. So this goroutine holds its thread from the
// fork until Chromium has exited, and then gives it back to the runtime, unlocked:
// ending it would also send the signal to every other child forked from that
// thread before — in a process that runs Redis or an identity provider beside its
// brokers (the test harness) one of those, killed when a session's Chromium exits
// (CI saw the reliability suite's Redis die so).
func (c *Chromium) run(cmd *exec.Cmd, stderr *os.File, started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(c.exited)
	defer stderr.Close()
	if err := cmd.Start(); err != nil {
		started <- err
		return
	}
	started <- nil
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(c.stderr, stderr)
	}()
	pid := cmd.Process.Pid
	// Wait for the exit without reaping: while Chromium is a zombie its pid, the
	// id of its process group, cannot be reused, so killing the group then ends
	// only what Chromium left running.
	waited := waitExited(pid)
	c.mu.Lock()
	if waited == nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	c.reaped = true
	c.mu.Unlock()
	err := cmd.Wait()
	// What Chromium wrote is in the pipe already; its crash handlers may hold the
	// pipe open a while longer.
	_ = stderr.SetReadDeadline(time.Now().Add(stderrDrain))
	<-copied
	c.mu.Lock()
	c.exitErr = err
	c.mu.Unlock()
	_ = c.pipe.Close()
	_ = os.RemoveAll(c.profile)
}

// waitExited blocks until process pid has exited, and leaves it unreaped.
func waitExited(pid int) error {
	const (
		pPID    = 1         // P_PID: wait for the process of this id
		wNOWAIT = 0x1000000 // WNOWAIT: leave it waitable
	)
	var info [128]byte // a siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|wNOWAIT, 0, 0) //nolint:gosec // the kernel writes a siginfo_t into info
		if errno != syscall.EINTR {
			if errno != 0 {
				return errno
			}
			return nil
		}
	}
}

// kill sends SIGKILL to Chromium's whole process group, unless Chromium is
// reaped already (its pid may be another process's then).
func (c *Chromium) kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.reaped && c.pid > 0 {
		_ = syscall.Kill(-c.pid, syscall.SIGKILL)
	}
}

// exitReport says how Chromium exited and what it last wrote, for the error of
// a failed launch; empty while it runs.
func (c *Chromium) exitReport() string {
	c.mu.Lock()
	err := c.exitErr
	c.mu.Unlock()
	if err == nil {
		return ""
	}
	return fmt.Sprintf("; chromium exited: %v: %s", err, c.stderr)
}

// Close stops Chromium, gracefully if it answers within ctx and
// closeTimeout, else by killing it, and removes its profile directory. It
// reports an error only when Chromium would not die.
func (c *Chromium) Close(ctx context.Context) error {
	if c.Browser != nil {
		ctx, cancel := context.WithTimeout(ctx, closeTimeout)
		// Chromium closes the connection as it exits, which may fail the call.
		if err := c.Browser.Context(ctx).Close(); err != nil {
			c.logger.Debug().Err(err).Msg("chromium close")
		}
		cancel()
	}
	return c.stop()
}

// Exited is closed when the Chromium process has exited, whoever stopped it.
func (c *Chromium) Exited() <-chan struct{} { return c.exited }

// stop waits for Chromium to exit, kills it if it does not in time, and
// removes the profile.
func (c *Chromium) stop() error {
	defer c.stopProxy()
	defer c.cancel()
	defer os.RemoveAll(c.profile)
	defer c.pipe.Close()
	select {
	case <-c.exited:
		c.logger.Info().Msg("chromium stopped")
		return nil
	case <-time.After(closeTimeout):
	}
	c.logger.Warn().Msg("chromium did not exit, killing it")
	c.kill()
	select {
	case <-c.exited:
		c.logger.Info().Msg("chromium killed")
		return nil
	case <-time.After(closeTimeout):
		return fmt.Errorf("chromium (pid %d) did not die", c.pid)
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int

	mu  sync.Mutex
	buf []byte // guarded by mu
}

// Write keeps the end of p; it never fails.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String is what is kept.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// A profile directory is named profilePrefix+random and holds ownerFile, the identity
// of the broker process that made it (see processIdentity).
const (
	profilePrefix = "agentfy-chromium-"
	ownerFile     = "agentfy-owner"
	// userDataDir, inside a profile, is Chromium's user data directory, and tempDir,
	// inside that, its TMPDIR where the system's cannot be (chromiumTempDir).
	userDataDir = "data"
	tempDir     = "tmp"
	// sweptPrefix names a profile a sweep has claimed (renamed) and not yet removed
	// whole: a child of the dead Chromium may still write into it for a moment, which
	// makes the removal fail with "directory not empty". The next sweep removes it.
	sweptPrefix = "agentfy-swept-"
	// orphanAge is how old a profile without an owner file must be to count as left
	// behind (the owner file is written right after the directory is made).
	orphanAge = time.Minute
)

// processIdentity is "pid starttime": the start time (from /proc) tells a live owner
// from a new process that reuses a dead one's pid. Empty start time where /proc has
// none.
func processIdentity(pid int) string {
	start := ""
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// The fields after the command name, which is in parentheses and may hold
		// spaces; starttime is the 22nd field of the line, the 20th after it.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 {
			if f := strings.Fields(string(b[i+1:])); len(f) > 19 {
				start = f[19]
			}
		}
	}
	return fmt.Sprintf("%d %s", pid, start)
}

// SweepProfiles removes the Chromium profiles under parent ("" means the temporary
// directory) whose broker is no longer running, and those without an owner that are
// older than orphanAge, and what earlier sweeps claimed but could not remove. It
// returns how many profiles it removed; a profile it cannot read is left alone.
func SweepProfiles(parent string) int {
	if parent == "" {
		parent = os.TempDir()
	}
	dirs, err := filepath.Glob(filepath.Join(parent, profilePrefix+"*"))
	if err != nil {
		return 0
	}
	removeSwept(parent)
	removed := 0
	for _, dir := range dirs {
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		owner, err := os.ReadFile(filepath.Join(dir, ownerFile)) //nolint:gosec // a profile directory of this broker's kind, by its prefix
		switch {
		case errors.Is(err, os.ErrNotExist):
			if time.Since(fi.ModTime()) < orphanAge {
				continue
			}
		case err != nil:
			continue
		default:
			var pid int
			if _, err := fmt.Sscanf(string(owner), "%d", &pid); err != nil || pid <= 0 {
				continue
			}
			if ownerAlive(pid, string(owner)) {
				continue
			}
		}
		// Claim it first: the rename takes the profile away at once, even while a
		// dying child of its Chromium still writes into it, and the removal follows.
		swept := filepath.Join(parent, sweptPrefix+strings.TrimPrefix(filepath.Base(dir), profilePrefix))
		if os.Rename(dir, swept) != nil {
			continue
		}
		removed++
		_ = os.RemoveAll(swept)
	}
	return removed
}

// removeSwept removes what earlier sweeps claimed but could not remove whole.
func removeSwept(parent string) {
	dirs, err := filepath.Glob(filepath.Join(parent, sweptPrefix+"*"))
	if err != nil {
		return
	}
	for _, dir := range dirs {
		if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
			_ = os.RemoveAll(dir)
		}
	}
}

// ownerAlive reports whether the process that wrote identity still runs: its pid
// exists with the same start time. Without /proc nothing can be told, and the owner
// counts as alive.
func ownerAlive(pid int, identity string) bool {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return true
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
		return false
	}
	return processIdentity(pid) == identity
}
