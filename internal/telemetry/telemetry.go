// Package telemetry sets up the traces of one part of Agentfy (the API replica, the
// worker, the broker) from the standard OpenTelemetry variables, and holds what every
// hop shares: the service names, the one table of span names, the span attributes an
// operator filters on, the W3C Trace Context propagator and its carriers, otelhttp's
// wrappers of the HTTP hops, and the helpers that put the trace id into a log line and
// the traceresponse header.
//
// Tracing is off unless an OTLP endpoint or exporter is configured: Setup then installs
// nothing, the parts get a nil trace.TracerProvider and skip every wrapper, and no
// exporter goroutine runs. Each part gets a TracerProvider of its own, passed in, never
// only the global one, so that the development stack, which runs several parts in one
// process, still names each by its own service.name.
//
// Nothing a span carries may identify what a viewer saw: no URL, title, frame byte,
// grant, token or key — only ids, outcomes and reasons.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/wire"
)

// The service.name of each part.
const (
	ServiceAPI    = "agentfy-api"
	ServiceWorker = "agentfy-worker"
	ServiceBroker = "agentfy-broker"
)

// ScopeName is the instrumentation scope of the spans Agentfy starts itself.
const ScopeName = "github.com/agentfy/agentfy"

// The attributes an operator filters on, under the project's one prefix. None of them
// carries a credential: a viewer is named by its user id or its organisation key's id.
const (
	AttrAgentID   = attribute.Key("agentfy.agent.id")
	AttrSessionID = attribute.Key("agentfy.session.id")
	// AttrViewerKind is the audit event's viewer kind (audit.ViewerMember,
	// audit.ViewerPartner): one name for each kind in every record of a view.
	AttrViewerKind = attribute.Key("agentfy.viewer.kind")
	AttrViewerID   = attribute.Key("agentfy.viewer.id")
	// AttrOutcome is the view route's outcome (frame, no_tab, not_live, or the error
	// body's code); the consume route's, ok or its error body's code; on the other
	// spans that handle a view (SpanViewRequest, SpanViewRelay, SpanWorkerView, the
	// broker's capture) ok or unavailable. The HTTP client spans carry none: their
	// status code and status say it.
	AttrOutcome = attribute.Key("agentfy.outcome")
	// AttrReason is why a view failed: a label of the reasons' table (wire.Labels).
	AttrReason = attribute.Key("agentfy.reason")
)

// Outcomes of the inner hops (AttrOutcome): the request, the relay, the worker, the
// capture; a consume redeemed is ok too.
const (
	OutcomeOK          = "ok"
	OutcomeUnavailable = "unavailable"
)

// The spans of a view, named in this one table (docs/operating.md, "Traces"), each by
// its operation, never by an id.
//
// An HTTP server span is named by the router that matched the request: its method and
// the route's own template, "GET /v1/agents/:id/worker/view" (the API's gin route,
// the broker's http.ServeMux pattern; Handler, EdgeHandler), never the path with its
// ids. The other spans are named here.
const (
	// SpanViewRequest is the requesting replica's NATS request to the owner: a client
	// span with the attributes of MessagingSend.
	SpanViewRequest = "view request"
	// SpanViewRelay is the owner replica's handling of it, the relay to the worker: a
	// server span with the attributes of MessagingProcess.
	SpanViewRelay = "view relay"
	// SpanWorkerView is the worker's handling of the JSON-RPC view call on the tool
	// channel, named by its method as OpenTelemetry names an RPC span; its parent comes
	// in the call's _meta (RPCMeta, RPCContext).
	SpanWorkerView = jsonrpc.MethodView
	// SpanCapture is the worker's request to its broker's capture route (Transport);
	// the broker's server span of it is named by its router alike.
	SpanCapture = http.MethodPost + " " + wire.CapturePath
	// SpanConsume is the broker's request to the replicas' consume route (Transport),
	// one span per replica tried; the replica's server span of it is named by its
	// router alike.
	SpanConsume = http.MethodPost + " " + wire.ConsumePath
)

// MessagingSend and MessagingProcess are the attributes OpenTelemetry's messaging
// conventions give the two NATS spans of a view: the requester's (SpanViewRequest)
// sends, the owner's (SpanViewRelay) processes. destination is the subject's template
// (bus.Namespace.SubjectTemplate, agentfy.<deployment>.db<N>.view.{session}): a span
// names the destination of every session alike, and the session by AttrSessionID.
func MessagingSend(destination string) []attribute.KeyValue {
	return messaging("request", semconv.MessagingOperationTypeSend, destination)
}

// MessagingProcess is the attributes of the owner's NATS span (SpanViewRelay): see
// MessagingSend.
func MessagingProcess(destination string) []attribute.KeyValue {
	return messaging("process", semconv.MessagingOperationTypeProcess, destination)
}

// messagingNATS is messaging.system for NATS, which the conventions' list of systems
// does not name.
var messagingNATS = semconv.MessagingSystemKey.String("nats")

func messaging(operation string, operationType attribute.KeyValue, destination string) []attribute.KeyValue {
	return []attribute.KeyValue{messagingNATS, semconv.MessagingOperationName(operation), operationType,
		semconv.MessagingDestinationName(destination)}
}

// Variables are the OTEL_* variables Setup reads, but OTEL_SERVICE_NAME (a part's own):
// what a process that starts another part passes on to it.
func Variables() []string {
	return []string{
		"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER",
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_RESOURCE_ATTRIBUTES",
	}
}

// ShutdownTimeout bounds Shutdown when its context has no deadline: the last spans'
// export must not hold a stopping process for long.
const ShutdownTimeout = 5 * time.Second

// Config says which part sets up its traces.
type Config struct {
	// Service is the part's service.name (ServiceAPI, ServiceWorker, ServiceBroker).
	// OTEL_SERVICE_NAME replaces it, unless Shared.
	Service string
	// Instance, when set, is service.instance.id (a replica's id).
	Instance string
	// Shared says several parts share this process's environment (the development
	// stack): OTEL_SERVICE_NAME is then ignored, so each keeps its own name.
	Shared bool
	// Getenv reads the OTEL_* variables; nil means os.Getenv. The exporter reads its
	// other settings (headers, timeout, certificates, compression) from the process's
	// environment itself.
	Getenv func(string) string
}

// Provider is one part's tracing: a TracerProvider exporting over OTLP, or nothing.
type Provider struct {
	sdk *sdktrace.TracerProvider // nil when tracing is off
}

// Errors of Setup: a variable with a value this package does not support.
var ErrUnsupported = errors.New("telemetry: unsupported setting")

// Setup reads the OTEL_* variables and returns the part's Provider. It installs nothing,
// and returns a Provider whose TracerProvider is nil, when OTEL_SDK_DISABLED is true,
// OTEL_TRACES_EXPORTER is none, or when neither an exporter nor an endpoint
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT) is set. Otherwise it
// exports over OTLP: OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL http/protobuf (the default)
// or grpc, sampled by OTEL_TRACES_SAMPLER (+ _ARG; parentbased_always_on by default),
// with the resource of OTEL_RESOURCE_ATTRIBUTES and the service name. It returns
// ErrUnsupported for an exporter, protocol or sampler it does not know, and the
// exporter's own error for a bad endpoint.
func Setup(ctx context.Context, cfg Config) (*Provider, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	env := func(name string) string { return strings.TrimSpace(getenv(name)) }
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		return &Provider{}, nil
	}
	tracesEndpoint, endpoint := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), env("OTEL_EXPORTER_OTLP_ENDPOINT")
	switch exporter := strings.ToLower(env("OTEL_TRACES_EXPORTER")); exporter {
	case "none":
		return &Provider{}, nil
	case "":
		if tracesEndpoint == "" && endpoint == "" {
			return &Provider{}, nil
		}
	case "otlp":
	default:
		return nil, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q (otlp or none)", ErrUnsupported, exporter)
	}
	protocol := env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	sampler, err := samplerOf(env("OTEL_TRACES_SAMPLER"), env("OTEL_TRACES_SAMPLER_ARG"))
	if err != nil {
		return nil, err
	}
	res, err := resourceOf(cfg, env)
	if err != nil {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	switch protocol {
	case "", "http/protobuf":
		var opts []otlptracehttp.Option
		switch {
		case tracesEndpoint != "":
			opts = append(opts, otlptracehttp.WithEndpointURL(tracesEndpoint))
		case endpoint != "":
			opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimRight(endpoint, "/")+"/v1/traces"))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	case "grpc":
		var opts []otlptracegrpc.Option
		switch {
		case tracesEndpoint != "":
			opts = append(opts, otlptracegrpc.WithEndpointURL(tracesEndpoint))
		case endpoint != "":
			opts = append(opts, otlptracegrpc.WithEndpointURL(endpoint))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	default:
		return nil, fmt.Errorf("%w: OTEL_EXPORTER_OTLP_PROTOCOL=%q (http/protobuf or grpc)", ErrUnsupported, protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sampler),
		sdktrace.WithResource(res),
	)
	return &Provider{sdk: tp}, nil
}

// samplerOf is the sampler OTEL_TRACES_SAMPLER names, parent-based by default: the
// inner hops of a view follow the decision of its first span, and a platform whose front
// end the replicas trust (EdgeHandler, TrustedSources) sees the view's spans inside its
// own trace. A request from outside has no parent here (EdgeHandler), so the root
// sampler decides for it.
func samplerOf(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("%w: OTEL_TRACES_SAMPLER_ARG=%q (a ratio from 0 to 1)", ErrUnsupported, arg)
		}
		return r, nil
	}
	switch strings.ToLower(name) {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		r, err := ratio()
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), err
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		r, err := ratio()
		return sdktrace.TraceIDRatioBased(r), err
	}
	return nil, fmt.Errorf("%w: OTEL_TRACES_SAMPLER=%q", ErrUnsupported, name)
}

// resourceOf is the part's resource: OTEL_RESOURCE_ATTRIBUTES (key=value pairs, values
// percent-encoded), then the service name and instance, which win.
func resourceOf(cfg Config, env func(string) string) (*resource.Resource, error) {
	var attrs []attribute.KeyValue
	if s := env("OTEL_RESOURCE_ATTRIBUTES"); s != "" {
		for _, pair := range strings.Split(s, ",") {
			k, v, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				return nil, fmt.Errorf("%w: OTEL_RESOURCE_ATTRIBUTES: a member without key=value", ErrUnsupported)
			}
			val, err := url.PathUnescape(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("%w: OTEL_RESOURCE_ATTRIBUTES: value of %s: %w", ErrUnsupported, k, err)
			}
			attrs = append(attrs, attribute.String(k, val))
		}
	}
	service := cfg.Service
	if name := env("OTEL_SERVICE_NAME"); name != "" && !cfg.Shared {
		service = name
	}
	attrs = append(attrs, semconv.ServiceName(service))
	if cfg.Instance != "" {
		attrs = append(attrs, semconv.ServiceInstanceID(cfg.Instance))
	}
	return resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
}

// TracerProvider is the part's provider, nil when tracing is off: the parts then skip
// every wrapper.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if p == nil || p.sdk == nil {
		return nil
	}
	return p.sdk
}

// Enabled reports whether the part exports traces.
func (p *Provider) Enabled() bool { return p != nil && p.sdk != nil }

// ForceFlush exports the spans that ended and wait in the batch, within ctx.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	return p.sdk.ForceFlush(ctx)
}

// Shutdown exports what is left and stops the exporter, within ctx's deadline or
// ShutdownTimeout when it has none. It may be called more than once.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ShutdownTimeout)
		defer cancel()
	}
	return p.sdk.Shutdown(ctx)
}

// Propagator is the W3C Trace Context propagator every hop injects and extracts with.
func Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

// RPCMeta is the _meta of a JSON-RPC call on the tool channel that carries ctx's trace
// context, as MCP carries it; nil, and so no _meta on the wire, when ctx has no span
// (tracing off).
func RPCMeta(ctx context.Context) *jsonrpc.Meta {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	m := &jsonrpc.Meta{}
	Propagator().Inject(ctx, m)
	return m
}

// RPCContext returns ctx with the remote trace context a call's _meta carries, if any:
// the parent of the span that handles the call (SpanWorkerView).
func RPCContext(ctx context.Context, m *jsonrpc.Meta) context.Context {
	if m == nil || m.TraceParent == "" {
		return ctx
	}
	return Propagator().Extract(ctx, m)
}

// Tracer is tp's tracer of Agentfy's own spans; a no-op one when tp is nil.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return noop.NewTracerProvider().Tracer(ScopeName)
	}
	return tp.Tracer(ScopeName)
}

// TraceID is the trace id of ctx's span, "" when it has none.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}

// TraceResponse is the W3C Trace Context Level 2 traceresponse header of ctx's span
// (00-<trace id>-<span id>-<flags>), "" when the span is not sampled: a trace the
// backend never receives is nothing to look up.
func TraceResponse(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// HeaderTraceResponse is the response header TraceResponse fills.
const HeaderTraceResponse = "traceresponse"

// Mark sets a hop span's outcome and reason, and an error status when reason is set.
func Mark(span trace.Span, outcome, reason string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(AttrOutcome.String(outcome))
	if reason != "" {
		span.SetAttributes(AttrReason.String(reason))
		span.SetStatus(codes.Error, reason)
	}
}

// End marks a hop span (Mark) and ends it.
func End(span trace.Span, outcome, reason string) {
	Mark(span, outcome, reason)
	span.End()
}
