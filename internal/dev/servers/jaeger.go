package servers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentfy/agentfy/internal/dev/redisserver"
)

// JaegerVersion is the release of github.com/jaegertracing/jaeger whose cmd/jaeger
// (Jaeger v2: the OpenTelemetry Collector with Jaeger's storage, query API and UI)
// internal/tools/jaeger pins; its go.mod says the same (TestJaegerBinary checks both).
const JaegerVersion = "v1.75.0"

const (
	// JaegerBuildTimeout bounds BuildJaeger: a cold build took 287 s on an idle
	// two-core machine (121 MB) and 35 min on a busy one (load 12), and a second test
	// process may wait for the first one's build.
	JaegerBuildTimeout = 60 * time.Minute
	// JaegerStartTimeout bounds how long RunJaeger waits for the query API to answer.
	JaegerStartTimeout = 60 * time.Second
	// jaegerStopTimeout bounds the wait for a killed process to be reaped.
	jaegerStopTimeout = 10 * time.Second
	// jaegerRequestTimeout bounds one call the harness makes to the query API.
	jaegerRequestTimeout = 10 * time.Second
	// jaegerBodyLimit bounds the answers the harness reads.
	jaegerBodyLimit = 16 << 20 // 16 MiB
	// jaegerLogTail is how much of Jaeger's log a failure shows.
	jaegerLogTail = 8 << 10 // 8 KiB
	// jaegerStartAttempts: a free port may be taken between FreePort and Jaeger's bind.
	jaegerStartAttempts = 3
)

// jaegerBuildArgs are the go build flags of the binary: the version `jaeger version`
// prints (a build from the module cache has none otherwise).
func jaegerBuildArgs() []string {
	return []string{"build", "-ldflags", "-X github.com/jaegertracing/jaeger/internal/version.latestVersion=" + JaegerVersion}
}

// jaegerBuildEnv is the build's environment beside the caller's: a static binary, as
// Jaeger's own releases are, so the one build serves the trace tests on this machine
// and the compose stack's stand-in image (scripts/compose-images.sh) alike.
var jaegerBuildEnv = []string{"CGO_ENABLED=0", "GOWORK=off"}

// BuildJaeger returns the path of a jaeger binary built from the module
// internal/tools/jaeger, building it if it is missing (about 5 min cold, logged through
// logf), within JaegerBuildTimeout, into the user's cache directory
// (os.UserCacheDir()/agentfy/jaeger-<version>-<hash>/jaeger) exactly as BuildHydra
// does: once across processes, under a file lock, the hash covering the tool module's
// go.mod, go.sum and the build flags. A failed build returns the compiler's output.
func BuildJaeger(ctx context.Context, logf func(format string, args ...any)) (string, error) {
	dir, err := ToolDir("jaeger")
	if err != nil {
		return "", err
	}
	bin, err := toolBinaryPath(dir, "jaeger", JaegerVersion, append(jaegerBuildArgs(), jaegerBuildEnv...))
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, JaegerBuildTimeout)
	defer cancel()
	if err := buildTool(ctx, dir, bin, "github.com/jaegertracing/jaeger/cmd/jaeger", jaegerBuildArgs(), jaegerBuildEnv, "about 5 min cold", logf); err != nil {
		return "", err
	}
	return bin, nil
}

// Jaeger is a Jaeger v2 all-in-one run by RunJaeger: in-memory storage, an OTLP
// receiver (HTTP and gRPC) and the query API, each on a free loopback port.
type Jaeger struct {
	// OTLPHTTP is the OTLP/HTTP receiver's base URL (OTEL_EXPORTER_OTLP_ENDPOINT with
	// the protocol http/protobuf); OTLPGRPC the OTLP/gRPC one's (protocol grpc).
	OTLPHTTP, OTLPGRPC string
	// QueryURL is the query API and UI's base URL (GET /api/traces/<traceId>).
	QueryURL string

	bin, dir, logPath string
	client            *http.Client

	mu      sync.Mutex
	cmd     *exec.Cmd     // guarded by mu; nil once stopped
	done    chan struct{} // closed when cmd exits
	waitErr error         // guarded by mu; set before done closes
}

// JaegerAt is a client of the query API at queryURL of a Jaeger run elsewhere (the
// compose stack's, on its published port): Trace, Services and RawTraces read it, and
// Stop has nothing to stop.
func JaegerAt(queryURL string) *Jaeger {
	return &Jaeger{QueryURL: strings.TrimSuffix(queryURL, "/"), client: &http.Client{}}
}

// errJaegerExited: the process ended before it was ready (a port taken meanwhile, say).
var errJaegerExited = errors.New("jaeger exited before it was ready")

// RunJaeger runs bin (BuildJaeger's) with a configuration of its own in dir, on free
// loopback ports, and waits until its query API answers. The caller calls Stop.
func RunJaeger(ctx context.Context, bin, dir string) (*Jaeger, error) {
	j := &Jaeger{
		bin: bin, dir: dir, logPath: filepath.Join(dir, "jaeger.log"),
		client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
	}
	var err error
	for range jaegerStartAttempts {
		var ports [4]int
		for i := range ports {
			if ports[i], err = redisserver.FreePort(ctx); err != nil {
				return nil, err
			}
		}
		if err = j.start(ctx, ports); !errors.Is(err, errJaegerExited) {
			break // ready, or a failure new ports would not cure
		}
	}
	if err != nil {
		return nil, fmt.Errorf("start jaeger: %w\n%s", err, j.LogTail())
	}
	return j, nil
}

// jaegerConfig is the all-in-one configuration (`jaeger print-config` shows the
// defaults it starts from) on the given loopback ports, with nothing but the OTLP
// receiver, memory storage and the query API: no sampling, health, metrics, expvar or
// zpages listener on a fixed port, and no tracing of its own queries.
func jaegerConfig(otlpHTTP, otlpGRPC, queryHTTP, queryGRPC int) string {
	return fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    resource:
      service.name: jaeger
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    # Jaeger would trace its own queries to localhost:4317, a port not its own here.
    enable_tracing: false
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:%[3]d
    grpc:
      endpoint: 127.0.0.1:%[4]d
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%[1]d
      grpc:
        endpoint: 127.0.0.1:%[2]d
processors:
  batch:
    timeout: 50ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`, otlpHTTP, otlpGRPC, queryHTTP, queryGRPC)
}

// start launches the process on ports (OTLP HTTP, OTLP gRPC, query HTTP, query gRPC)
// and waits until the query API answers.
func (j *Jaeger) start(ctx context.Context, ports [4]int) error {
	conf := filepath.Join(j.dir, "jaeger.yaml")
	if err := os.WriteFile(conf, []byte(jaegerConfig(ports[0], ports[1], ports[2], ports[3])), 0o600); err != nil {
		return err
	}
	j.OTLPHTTP = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	j.OTLPGRPC = "http://127.0.0.1:" + strconv.Itoa(ports[1])
	j.QueryURL = "http://127.0.0.1:" + strconv.Itoa(ports[2])
	log, err := os.OpenFile(j.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }() // the child has its own copy
	// The process outlives ctx (which bounds only the start); Stop ends it.
	cmd := exec.Command(j.bin, "--config", "file:"+conf) //nolint:gosec,noctx // the harness's jaeger binary
	cmd.Env = []string{"HOME=" + j.dir, "TMPDIR=" + os.TempDir()}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", j.bin, err)
	}
	done := make(chan struct{})
	j.mu.Lock()
	j.cmd, j.done = cmd, done
	j.mu.Unlock()
	go func() {
		err := cmd.Wait()
		j.mu.Lock()
		j.waitErr = err
		j.mu.Unlock()
		close(done)
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := j.get(rctx, "/api/services")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			j.mu.Lock()
			err := j.waitErr
			j.cmd = nil
			j.mu.Unlock()
			return fmt.Errorf("%w: %v", errJaegerExited, err)
		case <-ctx.Done():
			j.Stop()
			return fmt.Errorf("jaeger on %s not ready: %w", j.QueryURL, ctx.Err())
		case <-tick.C:
		}
	}
}

// Stop kills the process group and waits until it is gone. Safe to call more than
// once.
func (j *Jaeger) Stop() {
	j.mu.Lock()
	cmd, done := j.cmd, j.done
	j.cmd = nil
	j.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
	default:
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-done:
		case <-time.After(jaegerStopTimeout):
		}
	}
	j.client.CloseIdleConnections()
}

// LogTail is the end of Jaeger's log.
func (j *Jaeger) LogTail() string {
	b, err := os.ReadFile(j.logPath)
	if err != nil {
		return ""
	}
	return string(b[max(0, len(b)-jaegerLogTail):])
}

// ErrTraceNotFound: the query API knows no trace of that id (yet).
var ErrTraceNotFound = errors.New("jaeger: trace not found")

// get GETs path of the query API and returns the body of a 200; a 404 is
// ErrTraceNotFound.
func (j *Jaeger) get(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, jaegerRequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.QueryURL+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := j.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, jaegerBodyLimit))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, ErrTraceNotFound
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("jaeger: GET %s: status %d", path, resp.StatusCode)
	}
	return body, err
}

// JaegerTrace is one trace as the query API returns it (GET /api/traces/<traceId>).
type JaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []JaegerSpan             `json:"spans"`
	Processes map[string]JaegerProcess `json:"processes"`
	Warnings  []string                 `json:"warnings"`
}

// JaegerSpan is a span of a JaegerTrace.
type JaegerSpan struct {
	TraceID       string            `json:"traceID"`
	SpanID        string            `json:"spanID"`
	OperationName string            `json:"operationName"`
	References    []JaegerReference `json:"references"`
	StartTime     int64             `json:"startTime"` // µs since the epoch
	Duration      int64             `json:"duration"`  // µs
	Tags          []JaegerTag       `json:"tags"`
	Logs          []JaegerLog       `json:"logs"`
	ProcessID     string            `json:"processID"`
	Warnings      []string          `json:"warnings"`
}

// JaegerReference is a span's parent (refType CHILD_OF) or link.
type JaegerReference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// JaegerTag is an attribute.
type JaegerTag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// JaegerLog is a span event.
type JaegerLog struct {
	Timestamp int64       `json:"timestamp"`
	Fields    []JaegerTag `json:"fields"`
}

// JaegerProcess is the resource of the spans that name it: the service and its tags.
type JaegerProcess struct {
	ServiceName string      `json:"serviceName"`
	Tags        []JaegerTag `json:"tags"`
}

// Tag returns the value of a span's attribute key as text, "" when it has none.
func (s JaegerSpan) Tag(key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

// Parent is the span id of the span's parent, "" for a root.
func (s JaegerSpan) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Service is the service.name of the span's process.
func (t JaegerTrace) Service(s JaegerSpan) string { return t.Processes[s.ProcessID].ServiceName }

// Trace reads the trace of traceID (32 hex digits) from the query API; ErrTraceNotFound
// when it holds none.
func (j *Jaeger) Trace(ctx context.Context, traceID string) (JaegerTrace, error) {
	body, err := j.get(ctx, "/api/traces/"+traceID)
	if err != nil {
		return JaegerTrace{}, err
	}
	var out struct {
		Data []JaegerTrace `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return JaegerTrace{}, fmt.Errorf("jaeger: trace %s: %w", traceID, err)
	}
	if len(out.Data) == 0 {
		return JaegerTrace{}, ErrTraceNotFound
	}
	if len(out.Data) > 1 {
		return JaegerTrace{}, fmt.Errorf("jaeger: %d traces for the id %s", len(out.Data), traceID)
	}
	return out.Data[0], nil
}

// Services lists the service names that sent spans.
func (j *Jaeger) Services(ctx context.Context) ([]string, error) {
	body, err := j.get(ctx, "/api/services")
	if err != nil {
		return nil, err
	}
	var out struct {
		Data []string `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}

// RawTraces is the query API's answer listing the traces of service, as bytes
// (GET /api/traces?service=…&limit=…): what a test searches for text no span may carry.
func (j *Jaeger) RawTraces(ctx context.Context, service string, limit int) ([]byte, error) {
	return j.get(ctx, "/api/traces?service="+service+"&limit="+strconv.Itoa(limit)+"&lookback=1h")
}
