package e2e

import (
	"net/http"
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

// rgb is a pixel's 8-bit red, green and blue.
func rgb(c interface{ RGBA() (r, g, b, a uint32) }) [3]uint32 {
	r, g, b, _ := c.RGBA()
	return [3]uint32{r >> 8, g >> 8, b >> 8}
}
