package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	mrand "math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/wire"
)

// standInFrameBytes is the size the stand-in's frame aims at: the median JPEG of the
// end-to-end views of the demo site (section 5), 27 KiB.
const standInFrameBytes = 27 << 10

// standInFrame makes the JPEG every stand-in broker sends: 1280 × 720 of a fixed
// pseudo-random pattern, at the quality whose size is nearest standInFrameBytes. It is
// made once per process, and checked as the real broker checks a capture.
var standInFrame = sync.OnceValues(func() ([]byte, error) {
	img := image.NewGray(image.Rect(0, 0, 1280, 720))
	r := mrand.New(mrand.NewPCG(1, 2)) //nolint:gosec // a fixed picture's noise, no secret
	for y := range 720 {
		for x := range 1280 {
			v := uint8((x/8+y/8)%64*3) + uint8(r.IntN(24))
			img.SetGray(x, y, color.Gray{Y: v})
		}
	}
	var best []byte
	for q := 5; q <= 95; q += 5 {
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: q}); err != nil {
			return nil, err
		}
		if best == nil || absInt(buf.Len()-standInFrameBytes) < absInt(len(best)-standInFrameBytes) {
			best = buf.Bytes()
		}
	}
	if err := wire.CheckFrame(best); err != nil {
		return nil, fmt.Errorf("stand-in frame: %w", err)
	}
	return best, nil
})

func absInt(n int) int { return max(n, -n) }

// startStandIn serves the browser broker of one session of the capacity bench, without
// Chromium, on dir's socket: stack.SealingBroker, redeeming at apiURLs with brokerPass
// through client, whose page is not captured but standInFrame under a title naming
// agent, so that the bench can check that no view answers another agent's frame.
// onWork, when set, gets the time each capture spent making and sealing its page.
func startStandIn(ctx context.Context, dir, agent, brokerPass string, apiURLs []string, client *http.Client, onWork func(time.Duration)) (stop func(), err error) {
	frame, err := standInFrame()
	if err != nil {
		return nil, err
	}
	sb := &stack.SealingBroker{
		Page: func(now time.Time) ([]byte, error) {
			return json.Marshal(&wire.Page{
				URL: "https://capacity.invalid/" + agent, Title: agent, CapturedAt: wire.FormatCapturedAt(now),
				ContentType: wire.ContentTypeJPEG, Data: base64.StdEncoding.EncodeToString(frame),
			})
		},
		OnWork: onWork,
	}
	if err := sb.RedeemAt(client, apiURLs, brokerPass); err != nil {
		return nil, err
	}
	return sb.Serve(ctx, dir)
}
