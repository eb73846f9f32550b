package reliability

import (
	"bufio"
	"fmt"
	"net/netip"
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
// connect to it and capture every tab unmasked). No process of its Chromium's tree may
// hold a listening TCP socket, the broker process only its egress proxy's (the one
// Chromium's --proxy-server names, on loopback), and the profile must have no
// DevToolsActivePort file: CDP goes over a pipe.
func TestChromiumHasNoDevToolsPort(t *testing.T) {
	observed := ""
	record(t, "DevTools (the broker's Chromium)", "no listening socket in the broker's process tree but its egress proxy's; no DevToolsActivePort in the profile", &observed)
	ss := liveSession(t, "agent-devtools", stack.SessionOptions{BrokerProcess: true}) // the agentfy-broker binary
	pid := ss.BrokerPID()
	if pid == 0 {
		t.Fatal("the suite's broker is not a process of its own")
	}
	tree := append([]int{pid}, testenv.Descendants(pid)...)
	chromium, profiles, proxy := 0, map[string]bool{}, ""
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
			if addr, ok := strings.CutPrefix(a, "--proxy-server=http://"); ok {
				proxy = procAddr(t, addr)
			}
		}
	}
	var listening []string
	for _, p := range tree {
		for _, l := range listeningSockets(t, p) {
			if p == pid && proxy != "" && l == "tcp "+proxy {
				continue // the broker's egress proxy, the browser's only way out
			}
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
	if proxy == "" {
		observed = fmt.Sprintf("%d processes (%d Chromium): Chromium has no --proxy-server", len(tree), chromium)
		t.Error(observed)
		return
	}
	observed = fmt.Sprintf("%d processes (%d Chromium): no listening socket but the egress proxy's; no DevToolsActivePort in the profile", len(tree), chromium)
}

// procAddr is an IPv4 host:port as /proc/net/tcp writes it: the address's bytes in
// the machine's order (little-endian here), then the port, in upper-case hex.
func procAddr(t *testing.T, hostport string) string {
	t.Helper()
	ap, err := netip.ParseAddrPort(hostport)
	if err != nil || !ap.Addr().Is4() {
		t.Fatalf("the proxy's address %q is not an IPv4 address and port", hostport)
	}
	a := ap.Addr().As4()
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", a[3], a[2], a[1], a[0], ap.Port())
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
