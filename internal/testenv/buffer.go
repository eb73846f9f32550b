package testenv

import (
	"bytes"
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

// Cap is the buffer's capacity: the memory it holds.
func (b *Buffer) Cap() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Cap()
}
