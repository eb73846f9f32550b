package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentfy/agentfy/broker"
	"github.com/agentfy/agentfy/envelope"
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

// standIn is the browser broker of one session of the capacity bench, without
// Chromium. It serves the broker's socket (wire.SocketName in its directory) and
// answers POST /observe as broker.Broker.Capture does — the request id redeemed at the
// consume route with the session's broker pass (broker.ConsumeClient, the real
// broker's client, within wire.BrokerConsumeTimeout), the page sealed to the key
// it returns (envelope.SealJSON) — except that the page is not captured: it is a fixed
// JPEG whose title names the stand-in's agent, so that the bench can check that no
// view answers another agent's frame.
type standIn struct {
	agent   string
	consume *broker.ConsumeClient
	srv     *http.Server
	ln      net.Listener
	frame   []byte
	// onWork, when set, gets the time each capture spent sealing (the stand-in's
	// own work, which the latency is reported net of).
	onWork func(time.Duration)
}

// startStandIn serves a stand-in broker for agent on dir's socket, redeeming at the API
// URLs with brokerPass through client.
func startStandIn(ctx context.Context, dir, agent, brokerPass string, apiURLs []string, client *http.Client) (*standIn, error) {
	frame, err := standInFrame()
	if err != nil {
		return nil, err
	}
	cc, err := broker.NewFailoverConsumeClient(client, apiURLs, brokerPass)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "unix", filepath.Join(dir, wire.SocketName))
	if err != nil {
		return nil, err
	}
	s := &standIn{agent: agent, consume: cc, ln: ln, frame: frame}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+wire.CapturePath, s.handleCapture)
	// A short idle timeout: the worker keeps idle connections to its broker, and ten
	// thousand of them would cost a descriptor each on both sides between views.
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 2 * time.Second, IdleTimeout: time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// close stops serving.
func (s *standIn) close() { _ = s.srv.Close() }

// handleCapture redeems and seals, as broker.Broker.handleCapture does.
func (s *standIn) handleCapture(w http.ResponseWriter, r *http.Request) {
	var req struct {
		RequestID string `json:"requestId"`
	}
	b, err := wire.ReadAll(http.MaxBytesReader(w, r.Body, 1<<10))
	if err != nil || wire.DecodeStrict(b, &req) != nil || !envelope.ValidRequestID(req.RequestID) {
		writeStandInError(w, wire.ReasonBadRequest)
		return
	}
	body, err := s.capture(r.Context(), req.RequestID)
	if err != nil {
		writeStandInError(w, wire.ReasonRefused)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// capture is broker.Broker.Capture with a fixed page instead of a capture.
func (s *standIn) capture(ctx context.Context, requestID string) ([]byte, error) {
	cctx, cancel := context.WithTimeout(ctx, wire.BrokerConsumeTimeout)
	key, err := s.consume.Consume(cctx, requestID)
	cancel()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	plaintext, err := json.Marshal(&wire.Page{
		URL: "https://capacity.invalid/" + s.agent, Title: s.agent, CapturedAt: wire.FormatCapturedAt(start),
		ContentType: wire.ContentTypeJPEG, Data: base64.StdEncoding.EncodeToString(s.frame),
	})
	if err != nil {
		return nil, err
	}
	body, err := envelope.SealJSON(rand.Reader, key, requestID, plaintext)
	if s.onWork != nil {
		s.onWork(time.Since(start))
	}
	return body, err
}

// writeStandInError answers with the broker's error body and its status for reason.
func writeStandInError(w http.ResponseWriter, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(wire.BrokerStatus(reason))
	_ = json.NewEncoder(w).Encode(wire.ErrorBody{Error: wire.ErrorDetail{Code: reason, Message: reason}})
}
