package servers

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Descendants lists the live processes below pid, read from /proc: what a stopped
// process may have left behind (tests check there is nothing).
func Descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command may hold spaces and parentheses; fields resume after the last ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 {
			if pp, err := strconv.Atoi(fields[1]); err == nil {
				parent[p] = pp
			}
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// Alive reports whether pid exists and is not a zombie.
func Alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// Buffer is an io.Writer that many goroutines may write to while another reads what
// they wrote: the log lines of a process, or of every component of a stack. It keeps
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
