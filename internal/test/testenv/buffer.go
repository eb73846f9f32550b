package testenv

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is an io.Writer that many goroutines may write to while a test reads what they
// wrote: the log lines of a process, or of every component of a stack. It keeps
// everything; a test that measures memory subtracts Cap.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer // guarded by mu
}

// Write appends p. It never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Lines returns, in order, the lines of a zerolog JSON log written so far whose level
// is level ("warn", "debug"…).
func (b *Buffer) Lines(level string) []string {
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if strings.Contains(line, `"level":"`+level+`"`) {
			out = append(out, line)
		}
	}
	return out
}

// Cap is the buffer's capacity: the memory it holds.
func (b *Buffer) Cap() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Cap()
}
