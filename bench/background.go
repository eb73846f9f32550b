package bench

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// A process in the background runs under Linux's SCHED_IDLE policy: only on a core no
// other thread wants, and off it as soon as another thread wakes up there. It stands
// for a process on a machine of its own better than a nice value does: a nice thread
// keeps its core for the rest of its slice when a view's thread wakes up, which puts a
// wait of up to a slice on every hop of a view.
const backgroundPolicy = "SCHED_IDLE"

// backgroundCommand runs a command in the background (chrt(1) from util-linux).
var backgroundCommand = []string{"chrt", "--idle", "0"}

// setBackground puts every thread of process pid in the background, or back under the
// normal policy at nice 0. A scheduling policy is a thread's, and a thread made later
// inherits its maker's: the threads are listed again until a pass finds none new, so
// that one made while they were listed is not missed.
func setBackground(pid int, background bool) error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}
	if background {
		attr.Policy = unix.SCHED_IDLE
	}
	done := map[int]bool{}
	for {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return err
		}
		fresh := 0
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || done[tid] {
				continue
			}
			if err := unix.SchedSetAttr(tid, &attr, 0); err != nil && !errors.Is(err, syscall.ESRCH) {
				return err
			}
			done[tid] = true
			fresh++
		}
		if fresh == 0 {
			return nil
		}
	}
}
