package stack

import (
	"context"
	"io"
	"net"
	"sync"
)

// link is a TCP proxy a test can cut: every connection through it is closed at once,
// as when a network path fails. It keeps listening, so peers can reconnect.
type link struct {
	ln     net.Listener
	addr   string
	target string

	mu    sync.Mutex
	conns map[net.Conn]struct{} // guarded by mu
	down  bool                  // refuse new connections; guarded by mu
}

func newLink(ctx context.Context, target string) (*link, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &link{ln: ln, addr: ln.Addr().String(), target: target, conns: map[net.Conn]struct{}{}}
	go l.accept(context.WithoutCancel(ctx))
	return l, nil
}

func (l *link) accept(ctx context.Context) {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		down := l.down
		l.mu.Unlock()
		if down {
			_ = c.Close()
			continue
		}
		var d net.Dialer
		up, err := d.DialContext(ctx, "tcp", l.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		l.mu.Lock()
		l.conns[c], l.conns[up] = struct{}{}, struct{}{}
		l.mu.Unlock()
		go l.pipe(c, up)
		go l.pipe(up, c)
	}
}

func (l *link) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	l.mu.Lock()
	delete(l.conns, dst)
	delete(l.conns, src)
	l.mu.Unlock()
}

// setDown makes the link refuse (down) or carry (up) new connections; going down also
// cuts the open ones.
func (l *link) setDown(down bool) {
	l.mu.Lock()
	l.down = down
	l.mu.Unlock()
	if down {
		l.cut()
	}
}

// cut closes every connection through the link.
func (l *link) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		_ = c.Close()
	}
}

func (l *link) close() {
	_ = l.ln.Close()
	l.cut()
}
