package testenv

import "github.com/agentfy/agentfy/internal/dev/servers"

// Buffer is servers.Buffer: an io.Writer many goroutines write to while a test reads
// what they wrote (a process's log, a stack's).
type Buffer = servers.Buffer

// Descendants lists the live processes below pid (servers.Descendants): tests use it to
// check that a stopped process left no child behind.
func Descendants(pid int) []int { return servers.Descendants(pid) }

// Alive reports whether pid exists and is not a zombie (servers.Alive).
func Alive(pid int) bool { return servers.Alive(pid) }
