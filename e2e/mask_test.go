package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/wire"
)

// TestMaskedFrame views the demo site's checkout page through the whole path, as a
// member and as a partner: the page says how many regions are masked, and the decoded
// frame shows the mask over a password field and the page's own colours over the
// control beside it (the broker's tests check every secret of the page by its pixels).
func TestMaskedFrame(t *testing.T) {
	agent := client.NewAgent(t, "")
	ss := startSession(t, agent, stack.SessionOptions{})
	if _, err := ss.Tool(client.Context(t), wire.ToolOpen, map[string]string{"url": st.Site + "/checkout.html"}); err != nil {
		t.Fatal(err)
	}
	key, _, err := st.Creds.CreateOrgKey(client.Context(t), "org-acme", "production", []string{auth.ScopeWorkerLogsRead})
	if err != nil {
		t.Fatal(err)
	}
	for _, viewer := range []struct{ name, path, credential string }{
		{"member", stacktest.ViewPath(agent), client.Token(t, "u-alice")},
		{"partner", stacktest.PartnerViewPath("org-acme", agent), key},
	} {
		client.OpenGate(t, agent)
		r := client.Get(t, replicaA(), viewer.path, viewer.credential)
		if r.Status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", viewer.name, r.Status, r.Body)
		}
		res := r.Result(t)
		if !res.Live || res.Page == nil || res.Page.Title != "Checkout" {
			t.Fatalf("%s: result %.200s", viewer.name, r.Body)
		}
		// Eleven secrets are in the first viewport, two more below it.
		if res.Page.Masked != 11 {
			t.Fatalf("%s: masked %d, want 11", viewer.name, res.Page.Masked)
		}
		img := stacktest.DecodeFrame(t, res.Page)
		// The password field's middle (CSS 389–689 × 190–234) and the email
		// field's beside it (65–365): the frame is one image pixel per CSS pixel.
		if c := rgb(img.At(539, 212)); max(c[0], c[1], c[2])-min(c[0], c[1], c[2]) > 16 || max(c[0], c[1], c[2]) > 0x80 {
			t.Fatalf("%s: the password field shows %v, want the mask's grey", viewer.name, c)
		}
		if c := rgb(img.At(80, 200)); c[0] < 0xe0 || c[1] < 0xd0 || c[2] > 0xc8 {
			t.Fatalf("%s: the email field shows %v, want its pale yellow", viewer.name, c)
		}
	}
}

// TestHiddenFrame views pages sealed with a frame masked whole, through the whole path
// from the broker's socket on, as a member and as a partner: the broker's reason why
// reaches the body after masked, as it wrote it, for each reason; a page whose hidden
// the contract does not allow is 503, never a frame. (A sealing broker stands in for
// the real one, which masks a frame whole only on pages built for it: the broker's and
// the reliability suite's tests.)
func TestHiddenFrame(t *testing.T) {
	agent := client.NewAgent(t, "")
	sb := &stack.SealingBroker{}
	ss := startSession(t, agent, stack.SessionOptions{BrokerHandler: sb})
	if err := sb.Redeem(st.LB, ss.Passes.Broker); err != nil {
		t.Fatal(err)
	}
	key, _, err := st.Creds.CreateOrgKey(client.Context(t), "org-acme", "production", []string{auth.ScopeWorkerLogsRead})
	if err != nil {
		t.Fatal(err)
	}
	viewers := []struct{ name, path, credential string }{
		{"member", stacktest.ViewPath(agent), client.Token(t, "u-alice")},
		{"partner", stacktest.PartnerViewPath("org-acme", agent), key},
	}
	page := `{"url":"https://example.com/checkout","title":"Checkout","capturedAt":"2026-11-30T12:00:00.000Z","contentType":"image/jpeg","data":"` +
		stacktest.EncodeJPEG(t, 64, 48) + `","masked":3`
	for _, reason := range wire.HiddenReasons {
		sb.Seal([]byte(page + `,"hidden":"` + reason + `"}`))
		want := `{"live":true,"page":` + page + `,"hidden":"` + reason + `"}}`
		for _, viewer := range viewers {
			client.OpenGate(t, agent)
			r := client.Get(t, replicaA(), viewer.path, viewer.credential)
			if r.Status != http.StatusOK || strings.TrimSuffix(r.Body, "\n") != want {
				t.Fatalf("%s, %s: %s %.300s; want 200 %.300s", reason, viewer.name, r.Summary(), r.Body, want)
			}
			if res := r.Result(t); res.Page == nil || res.Page.Masked != 3 || res.Page.Hidden != reason {
				t.Fatalf("%s, %s: page %+v", reason, viewer.name, res.Page)
			}
		}
	}
	for _, tc := range []struct{ name, page string }{
		{"hidden without masked", strings.Replace(page, `,"masked":3`, `,"hidden":"motion"}`, 1)},
		{"hidden with masked 0", strings.Replace(page, `,"masked":3`, `,"masked":0,"hidden":"motion"}`, 1)},
		{"an unknown reason", page + `,"hidden":"blur"}`},
		{"hidden null", page + `,"hidden":null}`},
		{"hidden a number", page + `,"hidden":1}`},
	} {
		sb.Seal([]byte(tc.page))
		client.OpenGate(t, agent)
		if r := client.Get(t, replicaA(), stacktest.ViewPath(agent), client.Token(t, "u-alice")); r.Status != http.StatusServiceUnavailable {
			t.Errorf("%s: %s, want 503", tc.name, r.Summary())
		}
	}
	// The same session's next frame, masked in part, is seen again.
	sb.Seal([]byte(page + `}`))
	client.OpenGate(t, agent)
	if r := client.Get(t, replicaA(), stacktest.ViewPath(agent), client.Token(t, "u-alice")); r.Status != http.StatusOK || strings.Contains(r.Body, `"hidden"`) {
		t.Fatalf("after the refused pages: %s %.300s", r.Summary(), r.Body)
	}
}

// rgb is a pixel's 8-bit red, green and blue.
func rgb(c interface{ RGBA() (r, g, b, a uint32) }) [3]uint32 {
	r, g, b, _ := c.RGBA()
	return [3]uint32{r >> 8, g >> 8, b >> 8}
}
