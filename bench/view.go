package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	_ "image/jpeg" // image.DecodeConfig of the frames
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/agentfy/agentfy/api"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/wire"
)

// maxViewBody bounds a view response the bench reads (a 2000-px frame in base64 is far
// below it).
const maxViewBody = 16 << 20 // 16 MiB

// viewer asks for frames as the web app does: GET the agent view route with a member's
// token, parse the body, base64-decode the JPEG and read its header. The pixels are not
// decoded (neither are they on the bare capture side); image.DecodeConfig checks that
// the bytes are a JPEG of a sane size.
type viewer struct {
	client *http.Client
	token  string
	caller string // the token's user as the gate's pace knows it
	st     *stack.Stack
}

func newViewer(user, token string, st *stack.Stack) *viewer {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	return &viewer{client: &http.Client{Transport: tr, Timeout: 15 * time.Second}, token: token, caller: api.UserCaller(user), st: st}
}

// frame is one decoded view.
type frame struct {
	bodyBytes int // the HTTP response body
	jpeg      []byte
	width     int
	url       string    // the tab's URL, as the page reports it
	masked    int       // regions the frame shows masked, as the page reports them
	hidden    string    // why the frame is masked whole (wire.Hidden*), as the page says
	headers   time.Time // when the response headers arrived
	// traceResponse is the answer's traceresponse header: set when the view was
	// sampled, empty when tracing is off.
	traceResponse string
}

// openGate deletes the agent's rate-gate key and the viewer's pace for it (one DEL of
// two named keys) and refills the owner's relay pace, so that the next request is let
// through at once instead of up to view.GateWindow (2 s) later. The bench paces one
// agent this way, outside the timed part (the CPU windows of section 5 count it: one
// Redis command).
func (v *viewer) openGate(ctx context.Context, agentID string) error {
	return v.st.OpenGateFor(ctx, agentID, v.caller)
}

// view requests one frame of agentID at base and decodes it; a response other than
// 200 with a page is an error.
func (v *viewer) view(ctx context.Context, base, agentID string) (frame, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/agents/"+agentID+"/worker/view", nil)
	if err != nil {
		return frame{}, err
	}
	req.Header.Set("Authorization", "Bearer "+v.token)
	resp, err := v.client.Do(req)
	if err != nil {
		return frame{}, err
	}
	headers := time.Now()
	defer resp.Body.Close()
	body, err := wire.ReadAll(io.LimitReader(resp.Body, maxViewBody))
	if err != nil {
		return frame{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return frame{}, fmt.Errorf("view: status %d: %.200s", resp.StatusCode, body)
	}
	var res struct {
		Live bool `json:"live"`
		Page *struct {
			URL         string `json:"url"`
			ContentType string `json:"contentType"`
			Data        []byte `json:"data"`
			Masked      int    `json:"masked"` // absent when none (wire.Page)
			Hidden      string `json:"hidden"` // absent unless masked whole
		} `json:"page"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return frame{}, fmt.Errorf("view: %w", err)
	}
	if !res.Live || res.Page == nil {
		return frame{}, fmt.Errorf("view: no frame: %.200s", body)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(res.Page.Data))
	if err == nil {
		err = wire.CheckFrame(res.Page.Data) // what the replica checked
	}
	if err != nil {
		return frame{}, fmt.Errorf("view: not a frame (%s %dx%d, %v)", format, cfg.Width, cfg.Height, err)
	}
	return frame{bodyBytes: len(body), jpeg: res.Page.Data, width: cfg.Width, url: res.Page.URL, masked: res.Page.Masked, hidden: res.Page.Hidden, headers: headers,
		traceResponse: resp.Header.Get(telemetry.HeaderTraceResponse)}, nil
}

// idleGap sleeps a random time below 50 ms (three frames at 60 Hz) before a timed
// operation. Chromium paints on a 16.7 ms cadence and a capture waits for the next
// frame, so back-to-back operations would start at a phase set by the previous one;
// a random gap makes every operation start at a random phase, as a viewer polling every
// 5 s does.
func idleGap(ctx context.Context) error {
	t := time.NewTimer(time.Duration(rand.Int64N(int64(50 * time.Millisecond)))) //nolint:gosec // jitter, not a secret
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
