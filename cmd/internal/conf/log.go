package conf

import (
	"os"
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
	zerolog.TimeFieldFormat = time.RFC3339Nano
	var l zerolog.Logger
	if os.Getenv("AGENTFY_LOG_FORMAT") == "console" {
		l = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05.000"})
	} else {
		l = zerolog.New(os.Stderr)
	}
	return l.Level(level).With().Timestamp().Str("component", component).Logger()
}

// Duration reads a duration variable or returns def.
func Duration(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	return time.ParseDuration(v)
}
