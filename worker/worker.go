// Package worker is the worker process's end of the tool channel: it connects to an API
// replica with its worker pass, says hello (image tag, bootstrap revision 2,
// features), and relays tool calls to the browser broker's tool endpoints and view
// request ids to the broker's /observe — two separate paths. It never sees a frame in
// clear nor the key it is sealed to: the broker's answer passes through as bytes.
package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/coder/websocket"
	"github.com/rs/zerolog"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/wire"
)

// Limits of the worker.
const (
	// MaxConcurrentTools and MaxConcurrentViews bound the requests relayed at once;
	// more are refused with wire.RPCBusy.
	MaxConcurrentTools = 16
	MaxConcurrentViews = 8
	// ToolTimeout bounds one tool call to the broker (a view's call has the worker's
	// hop of wire.Budget).
	ToolTimeout = 60 * time.Second
	// DialTimeout bounds connecting and the hello.
	DialTimeout = 10 * time.Second
	// WriteTimeout bounds one WebSocket write.
	WriteTimeout = 10 * time.Second
	// StatusSessionEnded is the close code that ends a session (wire.CloseSessionEnded).
	StatusSessionEnded websocket.StatusCode = wire.CloseSessionEnded
)

// ErrSessionEnded is returned by Run when the session is over (stopped, or the pass is
// no longer accepted): the worker must not reconnect.
var ErrSessionEnded = errors.New("worker: session ended")

// Config configures a worker.
type Config struct {
	// APIURLs are the API replicas (or one load-balanced URL), http:// or https://.
	APIURLs []string
	// Pass is the worker pass.
	Pass string
	// IPCDir holds the broker's socket (wire.SocketName). Set, it makes this a browser
	// worker: the hello lists browserView whether or not the broker is up yet, and a
	// view while its socket is missing or refuses connections answers broker_down, for
	// as long as that lasts (the two may start in any order, and a broker may
	// restart). Empty (the shell image), the worker does not advertise browserView and
	// refuses it with method-not-found.
	IPCDir string
	// ImageTag is the worker image's immutable tag, stated in the hello.
	ImageTag string
	// HealthFile, when set, exists exactly while the tool channel is open (a container
	// health check looks at it).
	HealthFile string
	Log        zerolog.Logger
	// Tracer, when set, gets the span of each view the worker relays (its parent the
	// replica's, from the call's _meta) and of its request to the broker's /observe
	// (whose traceparent header carries it on); nil means tracing off.
	Tracer trace.TracerProvider
}

// Worker relays between the tool channel and the broker.
type Worker struct {
	cfg      Config
	tracer   trace.Tracer
	broker   *http.Client // the tools' requests to the broker
	capturer *http.Client // the captures', on the same connections, traced
	tools    chan struct{}
	views    chan struct{}

	ended   chan struct{} // closed by EndSession
	endOnce sync.Once

	sessionID atomic.Pointer[string] // the session the last hello's answer named, for the spans
}

// EndSession ends the worker's session for good: the worker closes its tool channel
// with StatusSessionEnded, which stops the session, and Run returns ErrSessionEnded.
// Merely losing the channel, or the process stopping, never ends a session.
func (w *Worker) EndSession() { w.endOnce.Do(func() { close(w.ended) }) }

// New returns a Worker.
func New(cfg Config) (*Worker, error) {
	if len(cfg.APIURLs) == 0 || cfg.Pass == "" {
		return nil, errors.New("worker: API URL and worker pass are required")
	}
	sock := filepath.Join(cfg.IPCDir, wire.SocketName)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		MaxIdleConns:           4,
		IdleConnTimeout:        30 * time.Second,
		MaxResponseHeaderBytes: 16 << 10,
	}
	return &Worker{
		cfg: cfg, tracer: telemetry.Tracer(cfg.Tracer),
		broker: &http.Client{Transport: tr},
		// Only the capture is a hop of a view: its requests alone are traced.
		capturer: &http.Client{Transport: telemetry.Transport(cfg.Tracer, tr, telemetry.SpanCapture)},
		tools:    make(chan struct{}, MaxConcurrentTools),
		views:    make(chan struct{}, MaxConcurrentViews),
		ended:    make(chan struct{}),
	}, nil
}

// hasBrowser reports whether this is a browser worker image: one configured with the
// broker's IPC directory. It says nothing of whether the broker is up now, which
// changes during a session and is found out per call.
func (w *Worker) hasBrowser() bool { return w.cfg.IPCDir != "" }

// features lists browserView for a browser worker image. It never depends on the
// broker's socket existing at the moment of the hello: the replicas believe the hello
// for the whole connection, and "unsupported" is for an image without the capture,
// never for a broker that starts later or restarts.
func (w *Worker) features() []string {
	if !w.hasBrowser() {
		return []string{}
	}
	return []string{wire.FeatureBrowserView}
}

// Run connects and serves until ctx ends or the session ends, reconnecting with
// exponential backoff and moving on to the next API URL after a failure.
func (w *Worker) Run(ctx context.Context) error {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 100 * time.Millisecond
	bo.MaxInterval = 5 * time.Second
	for i := 0; ; i++ {
		select {
		case <-w.ended:
			return ErrSessionEnded
		default:
		}
		base := w.cfg.APIURLs[i%len(w.cfg.APIURLs)]
		start := time.Now()
		err := w.serve(ctx, base)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrSessionEnded) {
			return err
		}
		if time.Since(start) > 30*time.Second {
			bo.Reset()
		}
		wait := bo.NextBackOff()
		w.cfg.Log.Warn().Err(err).Dur("retry_in", wait).Msg("tool channel lost")
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

func channelURL(base string) (string, error) {
	u, err := url.Parse(strings.TrimRight(base, "/") + wire.ChannelPath)
	if err != nil {
		return "", err
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("worker: API URL must be http or https, not %q", u.Scheme)
	}
	return u.String(), nil
}

// serve runs one connection.
func (w *Worker) serve(ctx context.Context, base string) error {
	target, err := channelURL(base)
	if err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	ws, resp, err := websocket.Dial(dctx, target, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + w.cfg.Pass}},
	})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		if resp != nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
			return ErrSessionEnded
		}
		return fmt.Errorf("dial: %w", err)
	}
	ws.SetReadLimit(jsonrpc.MaxMessage)
	defer func() { _ = ws.CloseNow() }()

	features := w.features()
	hello, err := jsonrpc.NewRequest(1, jsonrpc.MethodHello, jsonrpc.HelloParams{
		ImageTag: w.cfg.ImageTag, BootstrapRevision: wire.BootstrapRevision, Features: features,
	})
	if err != nil {
		return err
	}
	if err := ws.Write(dctx, websocket.MessageText, hello); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	_, data, err := ws.Read(dctx)
	if err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	m, err := jsonrpc.Parse(data)
	if err != nil || !m.IsResponse() || m.Error != nil {
		return fmt.Errorf("hello refused")
	}
	var hr jsonrpc.HelloResult
	if wire.DecodeStrict(m.Result, &hr) == nil {
		w.sessionID.Store(&hr.SessionID)
	}
	w.cfg.Log.Info().Str("api", base).Strs("features", features).Msg("tool channel open")
	if w.cfg.HealthFile != "" {
		if err := os.WriteFile(w.cfg.HealthFile, []byte(base+"\n"), 0o600); err != nil {
			w.cfg.Log.Warn().Err(err).Msg("health file")
		}
		defer func() { _ = os.Remove(w.cfg.HealthFile) }()
	}

	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	go func() {
		select {
		case <-w.ended:
			// The close handshake reaches the replica, which stops the session.
			_ = ws.Close(StatusSessionEnded, "session ended")
		case <-cctx.Done():
		}
	}()
	for {
		data, err := jsonrpc.ReadMessage(cctx, ws)
		if err != nil {
			select {
			case <-w.ended:
				return ErrSessionEnded
			default:
			}
			if websocket.CloseStatus(err) == StatusSessionEnded {
				return ErrSessionEnded
			}
			return err
		}
		m, err := jsonrpc.Parse(data)
		if err != nil || !m.IsRequest() {
			continue
		}
		w.dispatch(cctx, ws, m)
	}
}

// dispatch answers one request on its own goroutine, within the bounds.
func (w *Worker) dispatch(ctx context.Context, ws *websocket.Conn, m *jsonrpc.Message) {
	id := *m.ID
	respond := func(b []byte, err error) {
		if err != nil {
			return
		}
		wctx, cancel := context.WithTimeout(ctx, WriteTimeout)
		defer cancel()
		_ = ws.Write(wctx, websocket.MessageText, b)
	}
	var sem chan struct{}
	var handle func(context.Context) ([]byte, error)
	switch m.Method {
	case jsonrpc.MethodView:
		if !w.hasBrowser() {
			respond(jsonrpc.NewViewError(id, wire.ReasonUnsupported, "method not found"), nil)
			return
		}
		sem = w.views
		handle = func(ctx context.Context) ([]byte, error) { return w.capture(ctx, id, m.Params) }
	case jsonrpc.MethodToolsCall:
		sem = w.tools
		handle = func(ctx context.Context) ([]byte, error) { return w.tool(ctx, id, m.Params) }
	default:
		respond(jsonrpc.NewError(id, wire.RPCMethodNotFound, "method not found"))
		return
	}
	select {
	case sem <- struct{}{}:
	default:
		if m.Method == jsonrpc.MethodView {
			respond(jsonrpc.NewViewError(id, wire.ReasonBusy, "too many requests in flight"), nil)
			return
		}
		respond(jsonrpc.NewError(id, wire.RPCBusy, "too many requests in flight"))
		return
	}
	go func() {
		defer func() { <-sem }()
		respond(handle(ctx))
	}()
}

// capture relays only the request id to the broker's /observe on the capture path,
// and passes its answer (the sealed envelope) back untouched. A failure is answered with
// the broker's own reason (wire.Reason*) when it names one, or with what the worker saw:
// broker_down when the broker's socket is missing or refuses the connection (the broker
// has not started yet, or is restarting). Every call dials anew when no idle connection
// is left, so views work again as soon as the socket accepts.
func (w *Worker) capture(ctx context.Context, id uint64, params json.RawMessage) ([]byte, error) {
	var p jsonrpc.ViewParams
	err := wire.DecodeStrict(params, &p)
	// The view's span continues the replica's trace, whose context the call's _meta
	// carries (a call that does not decode has none to believe).
	if err == nil {
		ctx = telemetry.RPCContext(ctx, p.Meta)
	}
	ctx, span := w.tracer.Start(ctx, telemetry.SpanWorkerView, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(semconv.RPCSystemNameJSONRPC, semconv.RPCMethod(jsonrpc.MethodView)))
	if sid := w.sessionID.Load(); sid != nil && span.IsRecording() {
		span.SetAttributes(telemetry.AttrSessionID.String(*sid))
	}
	if err != nil || !envelope.ValidRequestID(p.RequestID) {
		return w.viewFailed(ctx, span, id, wire.ReasonBadRequest, "requestId must be 64 lowercase hex"), nil
	}
	ctx, cancel := context.WithTimeout(ctx, wire.WorkerCaptureTimeout)
	defer cancel()
	// Only the request id goes on to the broker: the trace context travels in the
	// request's traceparent header.
	body, _ := json.Marshal(struct {
		RequestID string `json:"requestId"`
	}{p.RequestID})
	status, resp, err := w.post(ctx, w.capturer, wire.CapturePath, body)
	switch {
	case err != nil && ctx.Err() != nil:
		return w.viewFailed(ctx, span, id, wire.ReasonTimeout, "the broker did not answer in time"), nil
	case err != nil:
		return w.viewFailed(ctx, span, id, wire.ReasonBrokerDown, "broker unavailable"), nil
	case status == http.StatusOK:
		telemetry.End(span, telemetry.OutcomeOK, "")
		log := telemetry.WithTraceID(ctx, w.cfg.Log)
		log.Debug().Msg("view relayed")
		// The envelope passes through untouched: the worker cannot read it anyway.
		return jsonrpc.NewRawResult(id, resp), nil
	}
	reason := brokerReason(resp)
	return w.viewFailed(ctx, span, id, reason, "view failed at the broker: "+reason), nil
}

// viewFailed ends a view's span with reason, logs it, and makes the error answer.
func (w *Worker) viewFailed(ctx context.Context, span trace.Span, id uint64, reason, message string) []byte {
	telemetry.End(span, telemetry.OutcomeUnavailable, reason)
	log := telemetry.WithTraceID(ctx, w.cfg.Log)
	log.Debug().Str("reason", reason).Msg("view failed")
	return jsonrpc.NewViewError(id, reason, message)
}

// brokerReason is the reason of the broker's error body {"error":{"code","message"}}
// (wire.DecodeStrict): its code, passed on unchanged when it is one of the wire reasons,
// and ReasonBrokerError for any other code or a body that does not decode.
func brokerReason(body []byte) string {
	var out wire.ErrorBody
	if err := wire.DecodeStrict(body, &out); err != nil {
		return wire.ReasonBrokerError
	}
	return wire.ReasonOr(out.Error.Code, wire.ReasonBrokerError)
}

// tool relays a tool call to the broker's tool endpoint. The call's params and the
// broker's answer are read with wire.DecodeStrict: a member twice, in another case or
// unknown is refused, never taken for the field.
func (w *Worker) tool(ctx context.Context, id uint64, params json.RawMessage) ([]byte, error) {
	var p jsonrpc.ToolCallParams
	if err := wire.DecodeStrict(params, &p); err != nil || !wire.IsTool(p.Name) {
		return jsonrpc.NewError(id, wire.RPCInvalidParams, "unknown tool")
	}
	if !w.hasBrowser() {
		return jsonrpc.NewError(id, wire.RPCToolFailed, "this worker image has no browser")
	}
	args := []byte(p.Arguments)
	if len(args) == 0 {
		args = []byte("{}")
	}
	ctx, cancel := context.WithTimeout(ctx, ToolTimeout)
	defer cancel()
	status, resp, err := w.post(ctx, w.broker, wire.ToolPathPrefix+p.Name, args)
	if err != nil {
		return jsonrpc.NewError(id, wire.RPCUnavailable, "broker unavailable")
	}
	var out struct {
		Result json.RawMessage   `json:"result"`
		Error  *wire.ErrorDetail `json:"error"`
	}
	if err := wire.DecodeStrict(resp, &out); err != nil {
		return jsonrpc.NewError(id, wire.RPCUnavailable, "broker answered badly")
	}
	if status != http.StatusOK || out.Error != nil {
		msg := "tool failed"
		if out.Error != nil {
			msg = out.Error.Code + ": " + out.Error.Message
		}
		return jsonrpc.NewError(id, wire.RPCToolFailed, msg)
	}
	return jsonrpc.NewResult(id, out.Result)
}

func (w *Worker) post(ctx context.Context, client *http.Client, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://broker"+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := wire.ReadAll(io.LimitReader(resp.Body, jsonrpc.MaxMessage))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, b, nil
}
