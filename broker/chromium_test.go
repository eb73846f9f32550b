package broker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/internal/test/testenv"
)

// chromiumBin is the Chromium the package's tests run; under -short, where none runs,
// it skips tb.
func chromiumBin(tb testing.TB) string {
	tb.Helper()
	testenv.SkipUnderShort(tb, "chromiumBin", testenv.NeedsChromium)
	if bin := os.Getenv("AGENTFY_CHROMIUM"); bin != "" {
		return bin
	}
	return "/usr/lib/chromium/chromium"
}

// procStat is what the tests read of /proc/PID/stat.
type procStat struct {
	pid, ppid, pgrp int
	state           string
}

// readProcStat reads /proc/PID/stat; false if the process is gone.
func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, false
	}
	// The fields after the command name, which is in parentheses and may hold
	// spaces: state, ppid, pgrp.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 3 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgrp, _ := strconv.Atoi(f[2])
	return procStat{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0]}, true
}

// chromiumTree is every live process of Chromium's tree: pid, the processes
// descended from it (by the parent ids of /proc/*/stat), those of its process
// group, and those whose command line names its profile (Chromium's crash handlers
// leave both the tree and the group; their database is in the profile).
func chromiumTree(tb testing.TB, pid int, profile string) []int {
	tb.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatal(err)
	}
	var all []procStat
	for _, d := range dirs {
		if p, err := strconv.Atoi(d.Name()); err == nil {
			if st, ok := readProcStat(p); ok && st.state != "Z" {
				all = append(all, st)
			}
		}
	}
	tree := map[int]bool{}
	for _, st := range all {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", st.pid))
		if st.pid == pid || st.pgrp == pid || strings.Contains(string(cmdline), profile) {
			tree[st.pid] = true
		}
	}
	for grew := true; grew; {
		grew = false
		for _, st := range all {
			if !tree[st.pid] && tree[st.ppid] {
				tree[st.pid], grew = true, true
			}
		}
	}
	pids := make([]int, 0, len(tree))
	for p := range tree {
		pids = append(pids, p)
	}
	slices.Sort(pids)
	return pids
}

// socketInodes is the inodes of the sockets process pid holds open.
func socketInodes(pid int) ([]string, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var inodes []string
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(dir, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes = append(inodes, strings.TrimSuffix(inode, "]"))
		}
	}
	return inodes, nil
}

// listeningTCP is the inodes of the TCP sockets in state LISTEN (0A) in the network
// namespace of process pid, IPv4 and IPv6, with their local addresses.
func listeningTCP(tb testing.TB, pid int) map[string]string {
	tb.Helper()
	listening := map[string]string{}
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // a process gone, or a kernel without IPv6
			}
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			f := strings.Fields(sc.Text())
			if len(f) > 9 && f[3] == "0A" {
				listening[f[9]] = table + " " + f[1]
			}
		}
		_ = f.Close()
	}
	return listening
}

// TestChromiumListensOnNoPort checks that no process of the broker's Chromium
// listens on a TCP port and that its profile has no DevToolsActivePort file: no
// other process of the machine or the pod can reach its DevTools and capture its
// pages unmasked. Chromium speaks DevTools over its pipe alone (a port on loopback,
// as rod's launcher opens it, fails this test).
func TestChromiumListensOnNoPort(t *testing.T) {
	// A page open, so that a renderer and the network service run too.
	tb := newTestBroker(t, nil, nil)
	tb.open(t, newSite(t).URL+"/text")

	shared := sharedChromium(t)
	tree := chromiumTree(t, shared.pid, shared.profile)
	if len(tree) < 3 {
		t.Fatalf("Chromium's tree is %v: want the browser, its helpers and a renderer", tree)
	}
	sockets := 0
	for _, pid := range tree {
		inodes, err := socketInodes(pid)
		if err != nil {
			if pid == shared.pid {
				t.Fatalf("Chromium's descriptors: %v", err)
			}
			continue // a helper that exited meanwhile
		}
		sockets += len(inodes)
		listening := listeningTCP(t, pid)
		for _, inode := range inodes {
			if addr, ok := listening[inode]; ok {
				t.Errorf("process %d of Chromium listens on %s (socket inode %s)", pid, addr, inode)
			}
		}
	}
	// Chromium's processes talk over unix socket pairs: seeing none would mean the
	// scan saw nothing at all.
	if sockets == 0 {
		t.Fatalf("no socket found in Chromium's %d processes", len(tree))
	}
	if _, err := os.Stat(shared.profile); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(shared.profile, "DevToolsActivePort")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the profile holds a DevToolsActivePort file (%v)", err)
	}
	if !t.Failed() {
		t.Logf("%d processes, %d sockets, none listening on TCP", len(tree), sockets)
	}
}

// parentEnv marks the process of TestChromiumDiesWithTheBroker that plays the broker.
const parentEnv = "AGENTFY_TEST_CHROMIUM_PARENT"

// TestChromiumDiesWithTheBroker kills, with SIGKILL, a process that launched
// Chromium with Leakless, as a crash of the broker would, while Chromium is
// stopped: every process of Chromium's tree exits all the same. The parent-death
// signal is sent when the thread that forked Chromium ends; the process plays the
// broker for a while first, with goroutines come and gone, so that Go could have
// ended an idle thread.
func TestChromiumDiesWithTheBroker(t *testing.T) {
	if os.Getenv(parentEnv) != "" {
		playBroker(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChromiumDiesWithTheBroker$", "-test.count=1") //nolint:gosec // this test binary
	cmd.Env = append(os.Environ(), parentEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "chromium ") {
				line <- sc.Text()
				return
			}
		}
		close(line)
	}()
	var pid int
	var profile string
	select {
	case l, ok := <-line:
		if _, err := fmt.Sscanf(l, "chromium %d %s", &pid, &profile); !ok || err != nil {
			t.Fatalf("the broker process said %q (%v)", l, err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the broker process did not launch Chromium")
	}
	tree := chromiumTree(t, pid, profile)
	if len(tree) < 2 {
		t.Fatalf("Chromium's tree is %v", tree)
	}
	// Chromium exits on its own when its pipe closes, as it does when the broker
	// dies, but only while it runs: stopped, as a wedged Chromium would be, only
	// the kernel's signal ends it.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		var alive []int
		for _, p := range tree {
			if st, ok := readProcStat(p); ok && st.state != "Z" {
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("processes %v of Chromium's tree %v outlived the broker by 10 s", alive, tree)
		}
	}
	t.Logf("Chromium's %d processes exited %v after the broker was killed", len(tree), time.Since(killed).Round(time.Millisecond))
	// The dead broker's profile is left to the next launch's sweep.
	_ = cmd.Wait()
	if _, err := os.Stat(profile); err != nil {
		t.Fatalf("the dead broker's profile: %v", err)
	}
	if SweepProfiles(filepath.Dir(profile)) == 0 {
		t.Error("the sweep removed no profile")
	}
	if _, err := os.Stat(profile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the sweep left the dead broker's profile (%v)", err)
	}
}

// playBroker launches Chromium with Leakless, says its pid and profile on standard
// output, runs goroutines for a while, and waits to be killed.
func playBroker(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), DefaultLaunchTimeout)
	defer cancel()
	c, err := LaunchChromium(ctx, LaunchConfig{Bin: chromiumBin(t), Leakless: true}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	// Threads come and go: many goroutines blocked in system calls at once.
	for range 3 {
		done := make(chan struct{})
		for range 20 {
			go func() {
				defer func() { done <- struct{}{} }()
				_, _ = os.ReadFile("/proc/self/stat")
				if _, err := (exec.Command("true")).Output(); err != nil {
					t.Error(err)
				}
			}()
		}
		for range 20 {
			<-done
		}
	}
	if _, err := fmt.Printf("chromium %d %s\n", c.pid, c.profile); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Exited():
		t.Error("Chromium exited while its broker ran")
	case <-time.After(2 * time.Minute): // the test kills this process long before
	}
}

// TestLaunchChromiumFails starts binaries that are not a working Chromium: each
// launch fails within its deadline, says why, and leaves no process and no profile.
func TestLaunchChromiumFails(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		wantErr error
		want    string // in the error
	}{
		{name: "never answers", script: "exec sleep 60", wantErr: context.DeadlineExceeded},
		{name: "exits at once", script: "echo 'cannot open display' >&2; exit 3", want: "exit status 3: cannot open display"},
		// The launch's first command meets the closed pipe either as a broken pipe
		// (its write) or as the end of Chromium's output (its read): both are EOF.
		{name: "closes the pipe", script: "exec 3<&- 4>&-; exec sleep 60", wantErr: io.EOF, want: "EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Readable by Chromium's user, as which a root broker runs the script.
			dir := worldDir(t)
			bin := filepath.Join(dir, "chromium")
			if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+tt.script+"\n"), 0o755); err != nil { //nolint:gosec // a test's own script
				t.Fatal(err)
			}
			parent := filepath.Join(dir, "profiles")
			if err := os.Mkdir(parent, 0o755); err != nil { //nolint:gosec // searchable by Chromium's user
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			start := time.Now()
			c, err := LaunchChromium(ctx, LaunchConfig{Bin: bin, ProfileParent: parent, Leakless: true, Env: []string{"PATH=/usr/bin:/bin"}}, testLogger(t))
			if err == nil {
				_ = c.Close(context.Background())
				t.Fatal("the launch succeeded")
			}
			if took := time.Since(start); took > time.Second+closeTimeout {
				t.Errorf("the launch failed after %v", took)
			}
			if (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want %v and %q", err, tt.wantErr, tt.want)
			}
			if left, _ := os.ReadDir(parent); len(left) != 0 {
				t.Errorf("the launch left %v", left)
			}
		})
	}
}

// TestChromiumSparesOtherChildren: a Chromium that exits must not take the harness's
// other children with it. Linux sends a parent-death signal when the forking thread
// ends, and Go ends a thread whose goroutine exits locked to it; the goroutine that
// forks Chromium locks its thread, so it must give the thread back, not end it, or
// every child forked from that thread earlier (a Redis, an identity provider, each
// with a parent-death signal) is killed. CI saw the reliability suite's Redis die so.
// The test forks children from many threads, which then go idle, so the runtime hands
// one of them to the next Chromium's goroutine; after Chromium came and went three
// times, every child must live.
func TestChromiumSparesOtherChildren(t *testing.T) {
	const threads = 24
	children := make([]*exec.Cmd, threads)
	ready := make(chan error, threads)
	release := make(chan struct{})
	for i := range threads {
		go func() {
			// Locked at once by every goroutine together: each forks on a thread
			// of its own, then gives it back to the runtime's idle pool.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cmd := exec.Command("sleep", "300") //nolint:gosec,noctx // a stand-in child of the harness
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			err := cmd.Start()
			children[i] = cmd
			ready <- err
			<-release
		}()
	}
	for range threads {
		if err := <-ready; err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	t.Cleanup(func() {
		for _, c := range children {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	})
	for range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), DefaultLaunchTimeout)
		c, err := LaunchChromium(ctx, LaunchConfig{Bin: chromiumBin(t), Leakless: true}, zerolog.Nop())
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-c.Exited()
	}
	for i, c := range children {
		if st, ok := readProcStat(c.Process.Pid); !ok || st.state == "Z" {
			t.Fatalf("child %d (pid %d), forked from another thread, died when a Chromium exited", i, c.Process.Pid)
		}
	}
}
