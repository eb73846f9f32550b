package conf

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Logger is a JSON zerolog logger on stderr at AGENTFY_LOG_LEVEL (default info), with the
// process's component name. AGENTFY_LOG_FORMAT=console prints for people instead.
func Logger(component string) zerolog.Logger {
	level, err := zerolog.ParseLevel(Env("AGENTFY_LOG_LEVEL", "info"))
	if err != nil {
		level = zerolog.InfoLevel
	}
	return NewLogger(os.Stderr, level, os.Getenv("AGENTFY_LOG_FORMAT"), component)
}

// NewLogger is the logger every process writes: JSON lines on w (or, for format
// "console", lines for people) at level, each with a timestamp and the process's
// component name. Logger reads its level and format from the environment; a process
// that reads its configuration otherwise (the broker) passes them in.
func NewLogger(w io.Writer, level zerolog.Level, format, component string) zerolog.Logger {
	setTimeFormat()
	var l zerolog.Logger
	if format == "console" {
		l = zerolog.New(zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000"})
	} else {
		l = zerolog.New(w)
	}
	return l.Level(level).With().Timestamp().Str("component", component).Logger()
}

// setTimeFormat sets zerolog's time format, a global, once: a command that makes a
// logger while another's connection logs (the CLI's tests) would race with a second
// write.
var setTimeFormat = sync.OnceFunc(func() { zerolog.TimeFieldFormat = time.RFC3339Nano })

// Duration reads a duration variable or returns def.
func Duration(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	return time.ParseDuration(v)
}
