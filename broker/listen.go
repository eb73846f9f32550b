package broker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/agentfy/agentfy/wire"
)

// staleDialTimeout bounds the check whether an existing socket still has a
// listener.
const staleDialTimeout = 500 * time.Millisecond

// Listen listens on wire.SocketName in dir with mode SocketMode. A stale socket
// left by a dead broker is removed; a socket that still answers, or a path
// that is not a socket, is an error. The socket is made in a private
// directory and renamed into place, so nobody can reach it before its mode
// is set.
// Closing the listener removes the socket.
func Listen(ctx context.Context, dir string) (net.Listener, error) {
	path := filepath.Join(dir, wire.SocketName)
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("listen: %s exists and is not a socket", path)
		}
		d := net.Dialer{Timeout: staleDialTimeout}
		if c, err := d.DialContext(ctx, "unix", path); err == nil {
			_ = c.Close()
			return nil, fmt.Errorf("listen: another process serves %s", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("listen: remove stale socket: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("listen: %w", err)
	}

	// Make the socket in a private directory (0700, so nobody else can reach
	// it whatever its mode), set its mode, then move it into place.
	private, err := os.MkdirTemp(dir, "."+wire.SocketName+"-")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	defer os.RemoveAll(private)
	tmp := filepath.Join(private, wire.SocketName)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	// The listener would unlink tmp on Close, which no longer exists after
	// the rename; socketListener removes the real path instead.
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, SocketMode); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	return &socketListener{UnixListener: ln, path: path}, nil
}

// socketListener removes its socket file when closed.
type socketListener struct {
	*net.UnixListener
	path string
}

// Close closes the listener and removes the socket file.
func (l *socketListener) Close() error {
	err := l.UnixListener.Close()
	if rmErr := os.Remove(l.path); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) && err == nil {
		err = rmErr
	}
	return err
}

// Addr returns the socket's final path, not the temporary one it was made at.
func (l *socketListener) Addr() net.Addr {
	return &net.UnixAddr{Name: l.path, Net: "unix"}
}
