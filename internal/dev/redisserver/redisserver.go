// Package redisserver starts and stops a private redis-server process on a free loopback
// port. The test harness and the development stack use it; production points at a Redis
// deployment instead.
package redisserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StartTimeout bounds how long Start waits for the server to accept connections.
const StartTimeout = 10 * time.Second

// Options configures Start. The zero value is usable.
type Options struct {
	// Bin is the redis-server binary; empty means "redis-server" from PATH.
	Bin string
	// Dir holds the server's working directory. Empty means a new temporary directory
	// that Stop removes.
	Dir string
	// Port to listen on; 0 picks a free loopback port.
	Port int
	// Persist saves the dataset to Dir on shutdown and loads it at start, so a test can
	// stop Redis and start it again with its data (production Redis is the operator's).
	Persist bool
	// ACL is the content of an ACL file (deploy.RedisACL). Empty means no ACL file:
	// the default user without a password, for tests of Redis alone.
	ACL string
	// Args are more command-line options (cluster mode, replication, sentinel).
	Args []string
	// Sentinel runs the server as a Redis Sentinel whose configuration file is Config
	// (Sentinel rewrites it, so it lives in Dir).
	Sentinel bool
	Config   string
}

// Server is a running redis-server. Stop must be called to end it.
type Server struct {
	opts    Options // as started, with the chosen dir and port
	cmd     *exec.Cmd
	addr    string
	dir     string
	ownDir  bool
	done    chan struct{}
	waitErr error
	stop    sync.Once
}

// Start launches redis-server bound to 127.0.0.1 with persistence disabled, and returns
// once it answers PING. The process is killed if ctx ends before that.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin := opts.Bin
	if bin == "" {
		bin = "redis-server"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("redis-server not found (run scripts/setup.sh): %w", err)
	}
	dir, ownDir := opts.Dir, false
	if dir == "" {
		if dir, err = os.MkdirTemp("", "agentfy-redis-"); err != nil {
			return nil, fmt.Errorf("redis dir: %w", err)
		}
		ownDir = true
	}
	port := opts.Port
	if port == 0 {
		if port, err = FreePort(ctx); err != nil {
			return nil, err
		}
	}
	// Nothing is persisted: frames never reach Redis anyway, and a development or test
	// server must leave nothing behind.
	save := ""
	if opts.Persist {
		save = "3600 1" // any save point makes a SIGTERM shutdown write dump.rdb
	}
	args := []string{
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", save, "--appendonly", "no", "--dir", dir,
		"--protected-mode", "yes", "--daemonize", "no", "--loglevel", "warning",
		"--databases", "16",
	}
	if opts.Sentinel {
		confPath := filepath.Join(dir, "sentinel.conf")
		if err := os.WriteFile(confPath, []byte(opts.Config), 0o600); err != nil {
			if ownDir {
				_ = os.RemoveAll(dir)
			}
			return nil, fmt.Errorf("sentinel config: %w", err)
		}
		args = []string{confPath, "--sentinel", "--bind", "127.0.0.1", "--port", strconv.Itoa(port),
			"--dir", dir, "--protected-mode", "yes", "--daemonize", "no", "--loglevel", "warning"}
	}
	args = append(args, opts.Args...)
	if opts.ACL != "" {
		// The file holds only password hashes, but it is nobody else's business.
		aclPath := filepath.Join(dir, "users.acl")
		if err := os.WriteFile(aclPath, []byte(opts.ACL), 0o600); err != nil {
			if ownDir {
				_ = os.RemoveAll(dir)
			}
			return nil, fmt.Errorf("redis acl file: %w", err)
		}
		args = append(args, "--aclfile", aclPath)
	}
	// The process outlives ctx (which bounds only the start); Stop ends it.
	cmd := exec.Command(path, args...) //nolint:gosec,noctx // the configured redis-server binary
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		if ownDir {
			_ = os.RemoveAll(dir)
		}
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	s := &Server{opts: Options{Bin: opts.Bin, Dir: dir, Port: port, Persist: opts.Persist, ACL: opts.ACL, Args: opts.Args, Sentinel: opts.Sentinel, Config: opts.Config}, cmd: cmd, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, ownDir: ownDir, done: make(chan struct{})}
	go func() { s.waitErr = cmd.Wait(); close(s.done) }()

	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) waitReady(ctx context.Context) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := ping(ctx, s.addr); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redis-server on %s not ready: %w", s.addr, ctx.Err())
		case <-s.done:
			return fmt.Errorf("redis-server exited: %v", s.waitErr)
		case <-tick.C:
		}
	}
}

func ping(ctx context.Context, addr string) error {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	// With an ACL file the default user is off: NOAUTH means the server is up.
	if !strings.HasPrefix(line, "+PONG") && !strings.HasPrefix(line, "-NOAUTH") {
		return errors.New("unexpected answer to PING")
	}
	return nil
}

// Halt stops the server like Stop but keeps its directory for Restart.
func (s *Server) Halt() {
	owned := s.ownDir
	s.ownDir = false
	s.Stop()
	s.ownDir = owned
}

// Restart starts a new server on the same port and directory (with Persist, the same
// data) after Halt. The new server owns the directory from then on.
func (s *Server) Restart(ctx context.Context) (*Server, error) {
	n, err := Start(ctx, s.opts)
	if err != nil {
		return nil, err
	}
	n.ownDir, s.ownDir = s.ownDir, false
	return n, nil
}

// Addr is host:port of the server.
func (s *Server) Addr() string { return s.addr }

// URL is redis://host:port/db for the given database number.
func (s *Server) URL(db int) string { return fmt.Sprintf("redis://%s/%d", s.addr, db) }

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Dir is the server's working directory.
func (s *Server) Dir() string { return s.dir }

// Stop terminates the server (SIGTERM, then SIGKILL after two seconds), waits for it to
// exit and removes a temporary directory. It is safe to call more than once.
func (s *Server) Stop() {
	s.stop.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(2 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
		if s.ownDir {
			_ = os.RemoveAll(filepath.Clean(s.dir))
		}
	})
}

// Done is closed when the process has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// FreePort asks the kernel for a free loopback TCP port. Another process may take it
// before the caller binds it; callers that can bind port 0 themselves should.
func FreePort(ctx context.Context) (int, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
