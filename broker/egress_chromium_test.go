package broker

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-rod/rod/lib/proto"

	"github.com/agentfy/agentfy/broker/egress"
)

// testEgress is the policy allowing entries, resolving no name: a lookup fails the test
// (tests reach loopback only, and use addresses).
func testEgress(tb testing.TB, entries ...string) egress.Policy {
	tb.Helper()
	p, err := egress.Parse(strings.Join(entries, ","))
	if err != nil {
		tb.Fatal(err)
	}
	return p.WithResolver(failingResolver{tb})
}

// failingResolver fails the test it belongs to when asked anything.
type failingResolver struct{ tb testing.TB }

func (r failingResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.tb.Errorf("a name was resolved: %q", host)
	return nil, &net.DNSError{Err: "no lookups in tests", Name: host, IsNotFound: true}
}

// TestEgressRefused tells the broker's browser to open and navigate to a listener of the
// deployment (on loopback, as the dev stack's replicas, NATS and Redis are) and to the
// link-local and metadata addresses: each tool call is refused with 403 refused_address
// naming its rule, and the listener receives nothing; an allowed site still opens.
func TestEgressRefused(t *testing.T) {
	var hits atomic.Int64
	listener := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(listener.Close)
	site := newSite(t)
	// The default policy, with only the site allowed (as the dev stack allows its demo
	// site): the listener is another port of the same loopback address.
	tbr := newTestBroker(t, nil, func(c *Config) {
		c.Egress = testEgress(t, site.Listener.Addr().String()).WithResolver(mapResolver{"localhost": netip.MustParseAddr("127.0.0.1")})
	})

	refused := []struct{ url, rule string }{
		{listener.URL + "/metrics", "loopback"},
		{"http://[::1]:4222/", "loopback"},
		{"http://localhost.:6379/", "loopback"}, // a name, which resolves to loopback
		{"http://169.254.169.254/latest/meta-data/", "link-local or cloud metadata"},
		{"http://[fd00:ec2::254]/latest/meta-data/", "link-local or cloud metadata"},
		{"http://10.0.0.5:8080/", "private"},
		{"http://0.0.0.0:8080/", "unspecified"},
		{"http://[::ffff:127.0.0.1]:8080/", "loopback"},
	}
	for _, tt := range refused {
		status, body := tbr.post(t, "/tools/browser_open", map[string]string{"url": tt.url})
		if status != http.StatusForbidden || !strings.Contains(string(body), `"refused_address"`) || !strings.Contains(string(body), tt.rule+" address") {
			t.Errorf("browser_open %s: %d %s, want 403 refused_address naming %q", tt.url, status, body, tt.rule)
		}
	}
	tab := tbr.open(t, site.URL+"/color/allowed")
	status, body := tbr.post(t, "/tools/browser_play", map[string]any{"tabId": tab.TabID, "steps": []Step{{Action: ActionNavigate, URL: listener.URL + "/"}}})
	if status != http.StatusForbidden || !strings.Contains(string(body), "loopback address") {
		t.Errorf("browser_play navigate to a listener: %d %s, want 403 naming loopback", status, body)
	}
	if tab.Title != "allowed" {
		t.Errorf("the allowed site opened as %q", tab.Title)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the deployment's listener received %d requests", n)
	}
}

// mapResolver resolves the names it holds and fails the rest as not found.
type mapResolver map[string]netip.Addr

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, &net.DNSError{Err: "not found", Name: host, IsNotFound: true}
}

// TestEgressOfThePage opens, in a Chromium whose policy allows only its site, a page of
// that site which itself reaches for another loopback listener (a deployment's, as far
// as the browser knows): an image, a fetch, a WebSocket, and a redirect of the tab. The
// page reports to its site when each has ended (the proxy's refusal is a network error
// or a 502 of the proxy's, which no-cors cannot tell apart), and the listener receives
// no connection: every connection of the browser goes through the broker's proxy, which
// dials only what the policy allows. It fails with Chromium's own connections (no proxy
// flags): the listener is then reached.
func TestEgressOfThePage(t *testing.T) {
	var hits atomic.Int64
	listener := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(listener.Close)
	target := listener.Listener.Addr().String()
	failed := make(chan string, 8)
	mux := http.NewServeMux()
	mux.HandleFunc("/reaching", func(w http.ResponseWriter, r *http.Request) {
		writeHTML(w, "reaching", `<script>
const report = what => fetch('/failed/' + what);
const img = new Image(); img.onerror = img.onload = () => report('image'); img.src = 'http://`+target+`/pixel';
fetch('http://`+target+`/data', {mode: 'no-cors'}).finally(() => report('fetch'));
const ws = new WebSocket('ws://`+target+`/socket'); ws.onclose = () => report('websocket');
</script>`)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+target+"/redirected", http.StatusFound)
	})
	mux.HandleFunc("/failed/{what}", func(w http.ResponseWriter, r *http.Request) {
		failed <- r.PathValue("what")
		w.WriteHeader(http.StatusNoContent)
	})
	site := httptest.NewServer(mux)
	t.Cleanup(site.Close)

	policy := testEgress(t, site.Listener.Addr().String())
	ctx, cancel := context.WithTimeout(t.Context(), DefaultLaunchTimeout)
	defer cancel()
	c, err := LaunchChromium(ctx, LaunchConfig{Bin: chromiumBin(t), Leakless: true, Egress: policy}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	b := c.Browser.Context(t.Context())
	if _, err := b.Page(proto.TargetCreateTarget{URL: site.URL + "/reaching", NewWindow: true}); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"image": true, "fetch": true, "websocket": true}
	deadline := time.After(30 * time.Second)
	for len(want) > 0 {
		select {
		case what := <-failed:
			if !want[what] {
				t.Errorf("the page reported %q", what)
			}
			delete(want, what)
		case <-deadline:
			t.Fatalf("the page did not report the failures of %v", want)
		}
	}
	// The redirect: the tab ends on Chromium's error page, never on the listener.
	page, err := b.Page(proto.TargetCreateTarget{URL: site.URL + "/redirect", NewWindow: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := page.WaitLoad(); err != nil {
		t.Fatal(err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the listener the page reached for received %d requests", n)
	}
}
