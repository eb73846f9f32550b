package reliability

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/agentfy/agentfy/internal/stack"
	"github.com/agentfy/agentfy/internal/stacktest"
	"github.com/agentfy/agentfy/wire"
)

// TestMasks views pages with secrets through the whole path: the checkout page's
// secrets are counted masked, and a page that scrolls itself at random moments while it
// is captured never sends a frame with a secret pixel in it — it is masked, or refused
// with 503 (reason capture).
func TestMasks(t *testing.T) {
	t.Run("checkout_page", func(t *testing.T) {
		observed := ""
		record(t, "Privacy masks", "200 with masked 11 (the secrets in view), for a member", &observed)
		agent := "agent-m-checkout"
		ss := liveSession(t, agent, stack.SessionOptions{})
		if _, err := ss.Tool(client.Context(t), wire.ToolOpen, map[string]string{"url": st.Site + "/checkout.html"}); err != nil {
			t.Fatal(err)
		}
		r := client.Poll(t, agent)
		res := r.Result(t)
		if r.Status != http.StatusOK || res.Page == nil {
			t.Fatalf("view: %s", r.Summary())
		}
		observed = fmt.Sprintf("%s, masked %d", r.Summary(), res.Page.Masked)
		if res.Page.Masked != 11 {
			t.Errorf("masked %d, want 11", res.Page.Masked)
		}
	})
	t.Run("page_moving_while_captured", func(t *testing.T) {
		observed := ""
		record(t, "Privacy masks", "every frame of a page that scrolls itself while captured has its secrets masked (no secret pixel); the others 503 (reason capture)", &observed)
		agent := "agent-m-moving"
		ss := liveSession(t, agent, stack.SessionOptions{})
		if _, err := ss.Tool(client.Context(t), wire.ToolOpen, map[string]string{"url": st.Site + "/moving.html"}); err != nil {
			t.Fatal(err)
		}
		const views = 12
		frames, masked, refused := 0, 0, 0
		for range views {
			before := unavailableByReason(t)
			r := client.Poll(t, agent)
			if r.Status == http.StatusServiceUnavailable {
				refused++
				if reason := newReason(t, before, unavailableByReason(t)); reason != wire.ReasonCapture {
					t.Errorf("a 503 of reason %q, want capture", reason)
				}
				continue
			}
			res := r.Result(t)
			if r.Status != http.StatusOK || res.Page == nil {
				t.Fatalf("view: %s", r.Summary())
			}
			frames++
			if res.Page.Masked > 0 {
				masked++
			}
			img := stacktest.DecodeFrame(t, res.Page)
			b := img.Bounds()
			for y := b.Min.Y; y < b.Max.Y; y++ {
				for x := b.Min.X; x < b.Max.X; x++ {
					if cr, cg, cb, _ := img.At(x, y).RGBA(); cg>>8 > 160 && cr>>8 < 120 && cb>>8 < 120 {
						t.Fatalf("a secret pixel at (%d, %d) of a frame that left (masked %d)", x, y, res.Page.Masked)
					}
				}
			}
		}
		observed = fmt.Sprintf("%d views: %d frames (%d with masks), %d × 503 capture; no secret pixel", views, frames, masked, refused)
		if frames == 0 || masked == 0 {
			t.Errorf("%s: nothing to check", observed)
		}
	})
}
