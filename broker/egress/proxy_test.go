package egress

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
)

// counting is a loopback HTTP server that counts the connections it accepts.
func counting(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("reached")) }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestDialContext: the policy's dialer connects to what it allows and refuses the rest
// before a connection is made, a name the allow-list names included.
func TestDialContext(t *testing.T) {
	allowed, _ := counting(t)
	refused, reached := counting(t)
	p, err := Parse(allowed.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.DialContext(t.Context(), "tcp", allowed.Listener.Addr().String())
	if err != nil {
		t.Fatalf("the allowed address: %v", err)
	}
	_ = c.Close()
	var re *RefusedError
	if _, err := p.DialContext(t.Context(), "tcp", refused.Listener.Addr().String()); !errors.As(err, &re) || re.Rule != "loopback" {
		t.Errorf("another loopback port: %v, want refused as loopback", err)
	}
	// localhost resolves from /etc/hosts to loopback addresses, each refused.
	if _, err := p.DialContext(t.Context(), "tcp", "localhost:"+refused.URL[len("http://127.0.0.1:"):]); !errors.As(err, &re) {
		t.Errorf("localhost: %v, want refused", err)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the refused listener accepted %d connections", n)
	}
}

// TestProxy: an HTTP client through the policy's proxy reaches the allowed site, and
// for another loopback listener gets the proxy's 502 while the listener accepts nothing,
// both as a plain request and through a CONNECT tunnel.
func TestProxy(t *testing.T) {
	allowed, _ := counting(t)
	refused, reached := counting(t)
	p, err := Parse(allowed.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(p.Proxy())
	t.Cleanup(proxy.Close)
	proxyURL, _ := url.Parse(proxy.URL)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	get := func(u string) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
		res, err := client.Do(req)
		if err != nil {
			return 0
		}
		_ = res.Body.Close()
		return res.StatusCode
	}
	if got := get(allowed.URL + "/"); got != http.StatusOK {
		t.Errorf("the allowed site through the proxy: %d", got)
	}
	if got := get(refused.URL + "/metrics"); got != http.StatusBadGateway && got != http.StatusInternalServerError {
		t.Errorf("a refused listener through the proxy: %d, want the proxy's 5xx", got)
	}
	// A CONNECT tunnel, as https and WebSockets take.
	conn, err := net.Dial("tcp", proxyURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("CONNECT " + refused.Listener.Addr().String() + " HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := conn.Read(buf)
	if string(buf[:min(n, 12)]) == "HTTP/1.1 200" || string(buf[:min(n, 12)]) == "HTTP/1.0 200" {
		t.Errorf("CONNECT to a refused listener: %q", buf[:n])
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the refused listener accepted %d connections", n)
	}
}
