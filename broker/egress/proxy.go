package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/elazarl/goproxy"
	"golang.org/x/net/netutil"
)

// Limits of the proxy the agent's browser goes through (Serve).
const (
	// MaxProxyConnections bounds the connections the browser holds open to the proxy
	// at once (Chromium keeps about six per host, and tunnels stay open).
	MaxProxyConnections = 512
	// DialTimeout bounds one outgoing connection's dial, the name's lookup included.
	DialTimeout = 15 * time.Second
	// proxyReadHeaderTimeout bounds the reading of a request's head from the browser.
	proxyReadHeaderTimeout = 10 * time.Second
	// proxyIdleTimeout closes a kept-alive connection from the browser that sent
	// nothing for this long.
	proxyIdleTimeout = 90 * time.Second
)

// DialContext connects to address for the agent's browser. A host:port the allow-list
// names is dialed as it is; any other only to an address CheckAddr allows, checked on
// the very address the dialer is about to connect to, after its own lookup: a name that
// resolved to a public address when a tool checked it and to a private one now (DNS
// rebinding) is refused all the same, before a packet leaves. A refusal is a
// *RefusedError.
func (p Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", portText, err)
	}
	d := net.Dialer{Timeout: DialTimeout}
	if !p.allowsName(host, uint16(port)) {
		d.Control = func(_, addr string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(addr)
			if err != nil {
				return err
			}
			return p.CheckAddr(host, ap.Addr(), ap.Port())
		}
	}
	return d.DialContext(ctx, network, address)
}

// allowsName reports whether the allow-list names host with port.
func (p Policy) allowsName(host string, port uint16) bool {
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	for _, a := range p.allow {
		if a.host != "" && a.host == name && a.port == port {
			return true
		}
	}
	return false
}

// Proxy is an HTTP proxy for the agent's browser (CONNECT for https and WebSockets,
// absolute-form requests for http) whose every outgoing connection is dialed by
// p.DialContext. It neither reads nor changes what a tunnel carries and logs nothing:
// what it would log is the page's URLs. A refused dial answers the browser 502.
func (p Policy) Proxy() http.Handler {
	proxy := goproxy.NewProxyHttpServer()
	proxy.Logger = discard{}
	// Never an upstream proxy from the broker's environment, never HTTP/2 tricks:
	// every connection is the policy's.
	proxy.ConnectDial = nil
	proxy.ConnectDialWithReq = func(req *http.Request, network, addr string) (net.Conn, error) {
		return p.DialContext(req.Context(), network, addr)
	}
	proxy.Tr = &http.Transport{
		DialContext:           p.DialContext,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       proxyIdleTimeout,
		ResponseHeaderTimeout: time.Minute,
		ExpectContinueTimeout: time.Second,
	}
	proxy.NonproxyHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not a proxy request", http.StatusBadRequest)
	})
	return proxy
}

// discard is goproxy's logger, silenced.
type discard struct{}

func (discard) Printf(string, ...any) {}

// Serve runs p's proxy on ln until ctx ends or ln fails, with at most
// MaxProxyConnections connections at once.
func (p Policy) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           p.Proxy(),
		ReadHeaderTimeout: proxyReadHeaderTimeout,
		IdleTimeout:       proxyIdleTimeout,
		MaxHeaderBytes:    64 << 10, // 64 KiB
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	err := srv.Serve(netutil.LimitListener(ln, MaxProxyConnections))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
