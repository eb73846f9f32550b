package reliability

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// TestChromiumHasNoDevToolsPort looks for what the red team used: a DevTools port of
// the broker's Chromium on the machine (any process of the broker's host or pod could
// connect to it and capture every tab unmasked). The broker process of a live session
// and every process of its Chromium's tree must hold no listening TCP socket, and the
// profile must have no DevToolsActivePort file: CDP goes over a pipe.
func TestChromiumHasNoDevToolsPort(t *testing.T) {
	observed := ""
	record(t, "DevTools (the broker's Chromium)", "no listening socket in the broker's process tree; no DevToolsActivePort in the profile", &observed)
	ss := liveSession(t, "agent-devtools", stack.SessionOptions{BrokerProcess: true}) // the agentfy-broker binary
	pid := ss.BrokerPID()
	if pid == 0 {
		t.Fatal("the suite's broker is not a process of its own")
	}
	tree := append([]int{pid}, testenv.Descendants(pid)...)
	chromium, profiles := 0, map[string]bool{}
	var listening []string
	for _, p := range tree {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "cmdline"))
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 0 && strings.Contains(filepath.Base(args[0]), "chrom") {
			chromium++
		}
		for _, a := range args {
			if dir, ok := strings.CutPrefix(a, "--user-data-dir="); ok {
				profiles[dir] = true
			}
		}
		for _, l := range listeningSockets(t, p) {
			listening = append(listening, fmt.Sprintf("pid %d %s", p, l))
		}
	}
	if chromium == 0 || len(profiles) == 0 {
		t.Fatalf("no Chromium with a profile under the broker (%d processes)", len(tree))
	}
	var files []string
	for dir := range profiles {
		if _, err := os.Stat(filepath.Join(dir, "DevToolsActivePort")); err == nil {
			files = append(files, filepath.Join(dir, "DevToolsActivePort"))
		}
	}
	observed = fmt.Sprintf("%d processes (%d Chromium): %d listening sockets; %d DevToolsActivePort files", len(tree), chromium, len(listening), len(files))
	if len(listening) > 0 || len(files) > 0 {
		t.Errorf("got %s: %q %q", observed, listening, files)
		return
	}
	observed = fmt.Sprintf("%d processes (%d Chromium): no listening socket; no DevToolsActivePort in the profile", len(tree), chromium)
}

// listeningSockets returns the TCP sockets of process pid that are listening, as
// "address:port" in /proc's hex: its fds' socket inodes looked up in the tcp and tcp6
// tables of its network namespace.
func listeningSockets(t *testing.T, pid int) []string {
	t.Helper()
	base := filepath.Join("/proc", strconv.Itoa(pid))
	fds, err := os.ReadDir(filepath.Join(base, "fd"))
	if err != nil {
		return nil // gone meanwhile
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(base, "fd", fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var out []string
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(base, "net", table))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) > 9 && fields[3] == "0A" && inodes[fields[9]] {
				out = append(out, table+" "+fields[1])
			}
		}
		_ = f.Close()
	}
	return out
}
