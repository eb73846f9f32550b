package bench

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestBackground: a farm node started in the background, as the capacity bench starts
// the farms that no step watches, runs every one of its threads under SCHED_IDLE, and
// setBackground moves every thread out of the background and back into it.
func TestBackground(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := append(slices.Clone(backgroundCommand), bin, "bench-node", nodeFarm)
	cmd := exec.Command(argv[0], argv[1:]...) //nolint:gosec // this test binary, as a bench node
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
	// A farm of no workers says it is up (every worker attached) and waits for commands.
	if _, err := fmt.Fprintf(in, "{\"Dir\":%q}\n", t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if up := bufio.NewScanner(out); !up.Scan() {
		t.Fatalf("the farm did not come up: %v", up.Err())
	}
	pid := cmd.Process.Pid
	wantPolicy(t, pid, unix.SCHED_IDLE)
	if err := setBackground(pid, false); err != nil {
		t.Fatal(err)
	}
	wantPolicy(t, pid, unix.SCHED_NORMAL)
	if err := setBackground(pid, true); err != nil {
		t.Fatal(err)
	}
	wantPolicy(t, pid, unix.SCHED_IDLE)
}

// wantPolicy fails t unless every thread of process pid, and there are several, runs
// under policy.
func wantPolicy(t *testing.T, pid int, policy uint32) {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) < 2 {
		t.Fatalf("%d threads: a Go process has more", len(tasks))
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			t.Fatal(err)
		}
		attr, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			t.Fatal(err)
		}
		if attr.Policy != policy {
			t.Fatalf("thread %d runs under policy %d, want %d", tid, attr.Policy, policy)
		}
	}
}
