package broker

import (
	"errors"
	"fmt"
	"os"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/broker/egress"
	"github.com/agentfy/agentfy/broker/masks"
	"github.com/agentfy/agentfy/wire"
)

// Names and limits of the broker. Limits carry their unit in the comment; the
// durations are defaults that [Config] may override.
const (
	// SocketMode is the permission of the socket: the worker shares the group.
	SocketMode os.FileMode = 0o660

	// MaxBodyBytes bounds every request body the broker reads.
	MaxBodyBytes = 64 << 10 // 64 KiB
	// MaxConsumeResponseBytes bounds the API's answer to a consumption.
	MaxConsumeResponseBytes = 4 << 10 // 4 KiB
	// MaxURLBytes bounds a URL given to browser_open or a navigate step.
	MaxURLBytes = 8 << 10 // 8 KiB
	// MaxSelectorBytes bounds a CSS selector of a click or type step.
	MaxSelectorBytes = 4 << 10 // 4 KiB
	// MaxTextBytes bounds the text of a type step.
	MaxTextBytes = 16 << 10 // 16 KiB
	// MaxSteps bounds the steps of one browser_play call.
	MaxSteps = 32
	// MaxWaitStep bounds the duration of one wait step.
	MaxWaitStep = 10 * time.Second
	// MaxScroll bounds the distance of one scroll step, in CSS pixels.
	MaxScroll = 100_000

	// CaptureQuality is the JPEG quality of every capture. The page's own limits —
	// the URL's and title's bytes (shortened on a character boundary), the frame's
	// bytes and pixels, its media type — are the API's, in package wire.
	CaptureQuality = 60

	// DefaultToolQueueSize is how many tool operations may be queued,
	// the running one included; one more is refused with queue_full.
	DefaultToolQueueSize = 16
	// DefaultToolTimeout bounds one tool operation once it runs.
	DefaultToolTimeout = 60 * time.Second
	// DefaultLoadTimeout bounds the wait for a page load in browser_open and
	// in a navigate step; a page still loading then is returned as it is.
	DefaultLoadTimeout = 15 * time.Second
	// DefaultMaxTabs bounds the tabs browser_open may create.
	DefaultMaxTabs = 32

	// DefaultMinCaptureInterval spaces real captures apart.
	DefaultMinCaptureInterval = 2 * time.Second
)

// Config holds the tunable limits of a [Broker]. Start from [DefaultConfig].
type Config struct {
	// ToolQueueSize is the bound of the tool operation queue.
	ToolQueueSize int
	// ToolTimeout bounds one tool operation once it starts running.
	ToolTimeout time.Duration
	// LoadTimeout bounds the wait for a page load inside a tool operation.
	LoadTimeout time.Duration
	// MaxTabs bounds the tabs that browser_open creates.
	MaxTabs int

	// CaptureTimeout bounds a whole capture.
	CaptureTimeout time.Duration
	// ConsumeTimeout bounds the redemption of a request id.
	ConsumeTimeout time.Duration
	// ScreenshotTimeout bounds the CDP calls of one capture's screenshot and masks.
	ScreenshotTimeout time.Duration
	// MinCaptureInterval is the least time between the starts of two real
	// captures; zero disables the spacing (benchmarks).
	MinCaptureInterval time.Duration

	// NoMask turns the privacy masks off: frames show secret fields and private
	// regions as they are. Masking is on unless a deployment says otherwise.
	NoMask bool
	// MaskAttributes and MaskClasses are the deployment's own attributes (any value)
	// and classes that mark an element private, besides the built-in ones
	// ([masks.Attributes], [masks.Classes]): names [masks.CheckName] accepts, at most
	// [masks.MaxNames] of each.
	MaskAttributes []string
	MaskClasses    []string
	// ShowOpaqueFrames leaves unmasked the frames the broker cannot read into (an
	// object or embed, a frame of another process it has no session on; frames.go): by
	// default each is masked whole, as it may hold a password or a card field. The
	// secrets of the frames it reads into are masked either way.
	ShowOpaqueFrames bool

	// Egress is where the agent's browser may go: a tool's URL whose host is
	// loopback, private, link-local (cloud metadata) or another non-public address
	// is refused before Chromium sends a byte, unless the policy allows it (the
	// operator's AGENTFY_BROWSER_ALLOW, the dev stack's demo site). The zero
	// policy refuses them all and allows the internet.
	Egress egress.Policy

	// OnCapture, if set, is called after every capture attempt, on the
	// capture's goroutine, for metrics. It must return quickly.
	OnCapture func(CaptureStats)

	// Tracer, when set, traces the captures: a server span for each request to
	// /observe, its parent the worker's (from the request's traceparent). The consume
	// call's span is its ConsumeClient's transport's (ConsumeTransport). Nil means
	// tracing off.
	Tracer trace.TracerProvider
}

// CaptureStats describes one capture attempt for [Config.OnCapture]. It
// never carries the URL, title or image.
type CaptureStats struct {
	// Duration is the time the CDP capture sequence took.
	Duration time.Duration
	// Bytes is the size of the JPEG, zero on failure.
	Bytes int
	// Failed tells whether the capture failed.
	Failed bool
	// Masked is how many secret regions the frame shows masked.
	Masked int
	// Hidden says why the frame was masked whole (a wire.Hidden* value), or "".
	Hidden string
}

// DefaultConfig returns the production limits.
func DefaultConfig() Config {
	return Config{
		ToolQueueSize:      DefaultToolQueueSize,
		ToolTimeout:        DefaultToolTimeout,
		LoadTimeout:        DefaultLoadTimeout,
		MaxTabs:            DefaultMaxTabs,
		CaptureTimeout:     wire.BrokerCaptureTimeout,
		ConsumeTimeout:     wire.BrokerConsumeTimeout,
		ScreenshotTimeout:  wire.BrokerScreenshotTimeout,
		MinCaptureInterval: DefaultMinCaptureInterval,
	}
}

// validate rejects limits that would make the broker unbounded or useless.
func (c Config) validate() error {
	var errs []error
	if c.ToolQueueSize < 1 {
		errs = append(errs, errors.New("tool queue size must be at least 1"))
	}
	if c.MaxTabs < 1 {
		errs = append(errs, errors.New("max tabs must be at least 1"))
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{
		{"tool timeout", c.ToolTimeout},
		{"load timeout", c.LoadTimeout},
		{"capture timeout", c.CaptureTimeout},
		{"consume timeout", c.ConsumeTimeout},
		{"screenshot timeout", c.ScreenshotTimeout},
	} {
		if d.d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive", d.name))
		}
	}
	if c.CaptureTimeout > wire.BrokerCaptureTimeout {
		// The worker gives up at wire.WorkerCaptureTimeout: a longer capture
		// would answer no one.
		errs = append(errs, fmt.Errorf("capture timeout must be at most %s", wire.BrokerCaptureTimeout))
	}
	if c.MinCaptureInterval < 0 {
		errs = append(errs, errors.New("min capture interval must not be negative"))
	}
	for _, names := range []struct {
		what  string
		names []string
	}{{"mask attributes", c.MaskAttributes}, {"mask classes", c.MaskClasses}} {
		if len(names.names) > masks.MaxNames {
			errs = append(errs, fmt.Errorf("%s: at most %d", names.what, masks.MaxNames))
		}
		for _, n := range names.names {
			if err := masks.CheckName(n); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", names.what, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("broker config: %w", err)
	}
	return nil
}
