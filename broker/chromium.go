package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-rod/rod"
	"github.com/go-rod/rod/lib/launcher"
	"github.com/go-rod/rod/lib/launcher/flags"
	"github.com/rs/zerolog"
)

// Chromium launch defaults.
const (
	// DefaultChromium is Debian's Chromium wrapper.
	DefaultChromium = "/usr/bin/chromium"
	// WindowSize gives a 1280×800 viewport in headless Chromium (the window
	// has chrome); every tab gets a window of this size.
	WindowSize = "1280,887"
	// DefaultLaunchTimeout bounds the start of Chromium up to its DevTools URL.
	DefaultLaunchTimeout = 30 * time.Second
	// closeTimeout bounds each step of stopping Chromium.
	closeTimeout = 5 * time.Second
)

// chromiumFlags are the switches of every launch, besides the binary, the
// profile directory and the DevTools port. There is no startup window: the
// broker starts with no tab, and every tab gets a window of its own.
var chromiumFlags = []string{
	"headless",
	"no-sandbox",
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
	// Leakless runs Chromium under rod's leakless guard, which kills it
	// when the broker dies without cleaning up.
	Leakless bool
	// Env is the environment of Chromium. The caller must strip every
	// secret from it. HOME and the XDG directories are replaced by
	// directories inside the private profile.
	Env []string
}

// Chromium is a running Chromium and the rod connection that controls it.
type Chromium struct {
	// Browser is the rod connection, without default device emulation.
	Browser *rod.Browser

	launcher   *launcher.Launcher
	controlURL string // the DevTools WebSocket URL
	profile    string
	logger     zerolog.Logger
	cancel     context.CancelFunc // ends the connection's context
	exited     chan struct{}      // closed when the process has exited
}

// LaunchChromium starts Chromium with a fresh private profile and connects to
// it. ctx bounds the start only. The caller must Close the result.
func LaunchChromium(ctx context.Context, cfg LaunchConfig, logger zerolog.Logger) (_ *Chromium, err error) {
	bin := cfg.Bin
	if bin == "" {
		bin = DefaultChromium
	}
	if _, err := os.Stat(bin); err != nil {
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

	l := launcher.New().Context(ctx)
	// Replace rod's defaults wholesale: they disable site isolation and add
	// switches this broker does not want.
	l.Flags = map[flags.Flag][]string{}
	l.Bin(bin).UserDataDir(profile).RemoteDebuggingPort(0).Leakless(cfg.Leakless)
	for _, f := range chromiumFlags {
		name, value, hasValue := strings.Cut(f, "=")
		if hasValue {
			l.Set(flags.Flag(name), value)
		} else {
			l.Set(flags.Flag(name))
		}
	}
	// Chromium keeps some state (crash database, caches) under HOME and the
	// XDG directories rather than the profile; point them into the profile,
	// which is removed at the end. The list is never empty, which matters:
	// rod passes an empty environment on as "inherit ours".
	env := slices.Clone(cfg.Env)
	env = slices.DeleteFunc(env, func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return name == "HOME" || name == "XDG_CONFIG_HOME" || name == "XDG_CACHE_HOME"
	})
	env = append(env, "HOME="+profile, "XDG_CONFIG_HOME="+filepath.Join(profile, ".config"), "XDG_CACHE_HOME="+filepath.Join(profile, ".cache"))
	l.Env(env...)

	u, err := l.Launch()
	if err != nil {
		l.Kill()
		return nil, fmt.Errorf("launch chromium: %w", err)
	}
	// The connection and rod's event loop outlive the launch context; Close
	// ends them. The DevTools URL is on loopback and already listening, so
	// connecting does not wait on anything slow.
	connCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &Chromium{launcher: l, controlURL: u, profile: profile, logger: logger, cancel: cancel, exited: make(chan struct{})}
	go func() {
		l.Cleanup() // waits for the exit, then removes the profile directory
		close(c.exited)
	}()
	b := rod.New().ControlURL(u).NoDefaultDevice().Context(connCtx)
	if err := b.Connect(); err != nil {
		l.Kill()
		_ = c.stop()
		return nil, fmt.Errorf("connect chromium: %w", err)
	}
	c.Browser = b
	logger.Info().Int("pid", l.PID()).Msg("chromium started")
	return c, nil
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
	defer c.cancel()
	defer os.RemoveAll(c.profile)
	select {
	case <-c.exited:
		c.logger.Info().Msg("chromium stopped")
		return nil
	case <-time.After(closeTimeout):
	}
	c.logger.Warn().Msg("chromium did not exit, killing it")
	c.launcher.Kill()
	select {
	case <-c.exited:
		c.logger.Info().Msg("chromium killed")
		return nil
	case <-time.After(closeTimeout):
		return fmt.Errorf("chromium (pid %d) did not die", c.launcher.PID())
	}
}

// A profile directory is named profilePrefix+random and holds ownerFile, the identity
// of the broker process that made it (see processIdentity).
const (
	profilePrefix = "agentfy-chromium-"
	ownerFile     = "agentfy-owner"
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
// older than orphanAge. It returns how many it removed; a profile it cannot read is
// left alone.
func SweepProfiles(parent string) int {
	if parent == "" {
		parent = os.TempDir()
	}
	dirs, err := filepath.Glob(filepath.Join(parent, profilePrefix+"*"))
	if err != nil {
		return 0
	}
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
		if os.RemoveAll(dir) == nil {
			removed++
		}
	}
	return removed
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
