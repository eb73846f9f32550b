package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/go-rod/rod/lib/proto"
)

// procStatus is what the sandbox tests read of /proc/PID/status and /proc/PID/ns.
type procStatus struct {
	uids    []string // real, effective, saved, file system
	seccomp string   // 0 none, 1 strict, 2 filter
	userNS  string
	pidNS   string
	cmdline string
}

func readProcStatus(pid int) (procStatus, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procStatus{}, err
	}
	var st procStatus
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			st.uids = strings.Fields(v)
		}
		if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			st.seccomp = strings.TrimSpace(v)
		}
	}
	if st.userNS, err = os.Readlink(fmt.Sprintf("/proc/%d/ns/user", pid)); err != nil {
		return procStatus{}, err
	}
	if st.pidNS, err = os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); err != nil {
		return procStatus{}, err
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return procStatus{}, err
	}
	st.cmdline = strings.ReplaceAll(string(cmdline), "\x00", " ")
	return st, nil
}

// chromiumUID is the uid the broker's Chromium must run as: DefaultChromiumUser's when
// the test runs as root, the test's own otherwise.
func chromiumUID(tb testing.TB) string {
	tb.Helper()
	if os.Geteuid() != 0 {
		return strconv.Itoa(os.Geteuid())
	}
	u, err := user.Lookup(DefaultChromiumUser)
	if err != nil {
		tb.Fatalf("the tests run as root and need user %s (scripts/setup.sh makes it): %v", DefaultChromiumUser, err)
	}
	return u.Uid
}

// renderPage opens a page in a window of its own, so that Chromium starts a renderer,
// and waits for it to load.
func renderPage(tb testing.TB, c *Chromium) {
	tb.Helper()
	page, err := c.Browser.Context(tb.Context()).Page(proto.TargetCreateTarget{URL: "data:text/html,<p>sandboxed</p>", NewWindow: true})
	if err != nil {
		tb.Fatal(err)
	}
	if err := page.WaitLoad(); err != nil {
		tb.Fatal(err)
	}
}

// checkSandboxed reads every process of Chromium's tree from /proc: none has
// --no-sandbox on its command line or runs as uid 0, the browser process runs as
// wantUID, and every renderer is under a seccomp-bpf filter (Seccomp: 2) in a user and
// a PID namespace other than the browser process's. It returns how many renderers it
// checked; a tree without one fails.
func checkSandboxed(tb testing.TB, c *Chromium, wantUID string) int {
	tb.Helper()
	browser, err := readProcStatus(c.pid)
	if err != nil {
		tb.Fatal(err)
	}
	if len(browser.uids) == 0 || browser.uids[1] != wantUID {
		tb.Errorf("the browser process (pid %d) runs as uids %v, want %s", c.pid, browser.uids, wantUID)
	}
	renderers := 0
	for _, pid := range chromiumTree(tb, c.pid, c.profile) {
		st, err := readProcStatus(pid)
		if errors.Is(err, os.ErrNotExist) {
			continue // a helper that exited meanwhile
		}
		if err != nil {
			tb.Fatal(err)
		}
		if strings.Contains(st.cmdline, "--no-sandbox") {
			tb.Errorf("pid %d runs with --no-sandbox: %.120s", pid, st.cmdline)
		}
		for _, uid := range st.uids {
			if uid == "0" {
				tb.Errorf("pid %d runs as root (uids %v): %.80s", pid, st.uids, st.cmdline)
				break
			}
		}
		if !strings.Contains(st.cmdline, "--type=renderer") {
			continue
		}
		renderers++
		if st.seccomp != "2" {
			tb.Errorf("renderer %d: Seccomp %s, want 2 (a seccomp-bpf filter)", pid, st.seccomp)
		}
		if st.userNS == browser.userNS {
			tb.Errorf("renderer %d shares the browser process's user namespace %s", pid, st.userNS)
		}
		if st.pidNS == browser.pidNS {
			tb.Errorf("renderer %d shares the browser process's PID namespace %s", pid, st.pidNS)
		}
		tb.Logf("renderer %d: uids %v, Seccomp %s, %s, %s (browser: %s, %s)", pid, st.uids, st.seccomp, st.userNS, st.pidNS, browser.userNS, browser.pidNS)
	}
	if renderers == 0 {
		tb.Error("Chromium's tree has no renderer to check")
	}
	return renderers
}

// TestChromiumSandboxed launches Chromium as the broker does and reads its processes
// from /proc once a page renders (checkSandboxed). Run as root, Chromium runs as
// DefaultChromiumUser; run as a plain user, as that user. It fails with no-sandbox back
// in chromiumFlags (the command line, Seccomp 0, the browser's namespaces) and, as
// root, without the switch of user (uid 0).
func TestChromiumSandboxed(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), DefaultLaunchTimeout)
	defer cancel()
	c, err := LaunchChromium(ctx, LaunchConfig{Bin: chromiumBin(t), Leakless: true}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	renderPage(t, c)
	checkSandboxed(t, c, chromiumUID(t))
	// The profile's data directory is Chromium's user's; the profile itself, which
	// names its broker, stays the broker's.
	fi, err := os.Stat(filepath.Join(c.profile, userDataDir))
	if err != nil {
		t.Fatal(err)
	}
	if uid := strconv.FormatUint(uint64(statUID(fi)), 10); uid != chromiumUID(t) {
		t.Errorf("the user data directory belongs to uid %s, want %s", uid, chromiumUID(t))
	}
	if fi, err := os.Stat(filepath.Join(c.profile, ownerFile)); err != nil || int(statUID(fi)) != os.Geteuid() {
		t.Errorf("the owner file: %v, want the broker's", err)
	}
}

// plainUserEnv marks the run of TestChromiumSandboxed that TestChromiumSandboxedAsPlainUser
// starts as an unprivileged user.
const plainUserEnv = "AGENTFY_TEST_PLAIN_USER"

// TestChromiumSandboxedAsPlainUser runs TestChromiumSandboxed again in a copy of this
// test binary started as an unprivileged user (DefaultChromiumUser), as a broker that is
// not root runs: Chromium starts as that user, sandboxed the same.
func TestChromiumSandboxedAsPlainUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the tests run as a plain user already: TestChromiumSandboxed is this case")
	}
	u, err := user.Lookup(DefaultChromiumUser)
	if err != nil {
		t.Fatalf("need user %s (scripts/setup.sh makes it): %v", DefaultChromiumUser, err)
	}
	// A copy the user can run: go test's build directory is root's alone.
	dir := worldDir(t)
	bin := filepath.Join(dir, "broker.test")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, self, bin, 0o755)
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	// The system's temporary directory, as a broker's: Chromium's singleton socket is
	// made in its profile, and a socket's path is short (about 100 bytes).
	tmp := os.TempDir()
	cmd := exec.CommandContext(t.Context(), bin, "-test.run=^TestChromiumSandboxed$", "-test.count=1", "-test.v") //nolint:gosec // a copy of this test binary
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + chromiumPath, "HOME=" + tmp, "TMPDIR=" + tmp, "AGENTFY_CHROMIUM=" + chromiumBin(t), plainUserEnv + "=1"}
	cmd.SysProcAttr = sysProcAttrAs(uint32(uid), uint32(gid)) //nolint:gosec // a system user's ids
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestChromiumSandboxed") {
		t.Fatalf("TestChromiumSandboxed as %s: %v\n%s", DefaultChromiumUser, err, out)
	}
	t.Logf("as %s (uid %s):\n%s", DefaultChromiumUser, u.Uid, grepLines(string(out), "renderer "))
}

// TestChromiumRefusesToRunWithoutASandbox starts Chromium where user namespaces cannot
// be made (a namespace whose limit is used up, as a host with
// user.max_user_namespaces=0 or a container under Docker's default seccomp profile
// is): the launch fails with ErrNoSandbox and says how to fix it; with NoSandbox (the
// operator's AGENTFY_CHROMIUM_SANDBOX=off) the same Chromium starts, still not as root.
func TestChromiumRefusesToRunWithoutASandbox(t *testing.T) {
	dir := worldDir(t)
	// Chromium in a user namespace (as uid 1000, no Linux capabilities) of a parent whose
	// limit of user namespaces is 1, spent on it: Chromium cannot make its own.
	bin := filepath.Join(dir, "chromium-without-userns")
	script := "#!/bin/sh\nexec unshare -U -r sh -c 'echo 1 > /proc/sys/user/max_user_namespaces && exec unshare -U --map-user=1000 --map-group=1000 \"$0\" \"$@\"' " + chromiumBin(t) + " \"$@\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil { //nolint:gosec // a test's script, run by Chromium's user
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), DefaultLaunchTimeout)
	defer cancel()
	c, err := LaunchChromium(ctx, LaunchConfig{Bin: bin, Leakless: true}, testLogger(t))
	if err == nil {
		_ = c.Close(context.Background())
		t.Fatal("Chromium started without a way to build its sandbox")
	}
	if !errors.Is(err, ErrNoSandbox) || !strings.Contains(err.Error(), "AGENTFY_CHROMIUM_SANDBOX=off") || !strings.Contains(err.Error(), "user namespaces") {
		t.Fatalf("error %q, want ErrNoSandbox saying what is missing and how to fix it", err)
	}
	t.Logf("refused: %v", err)

	c, err = LaunchChromium(ctx, LaunchConfig{Bin: bin, Leakless: true, NoSandbox: true}, testLogger(t))
	if err != nil {
		t.Fatalf("with NoSandbox: %v", err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	st, err := readProcStatus(c.pid)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.cmdline, "--no-sandbox") || st.uids[1] != chromiumUID(t) {
		t.Errorf("with NoSandbox: uids %v, command line %.200s", st.uids, st.cmdline)
	}
}

// TestChromiumUser: a root broker refuses to start Chromium as root or as a user that
// does not exist; a plain one, as anyone but itself.
func TestChromiumUser(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), DefaultLaunchTimeout)
	defer cancel()
	names := []string{"agentfy-no-such-user", "4000000000"}
	if os.Geteuid() == 0 {
		names = append(names, "root", "0")
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			c, err := LaunchChromium(ctx, LaunchConfig{Bin: chromiumBin(t), ProfileParent: parent, Leakless: true, User: name}, testLogger(t))
			if err == nil {
				_ = c.Close(context.Background())
				t.Fatalf("Chromium started as %q", name)
			}
			if !errors.Is(err, ErrNoUser) {
				t.Errorf("error %q, want ErrNoUser", err)
			}
			if left, _ := os.ReadDir(parent); len(left) != 0 {
				t.Errorf("the refused launch left %v", left)
			}
		})
	}
}

// worldDir is a temporary directory every user may read and search, for what
// Chromium's user runs.
func worldDir(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil { //nolint:gosec // the test's own directories, for Chromium's user
			tb.Fatal(err)
		}
	}
	return dir
}

func copyFile(tb testing.TB, from, to string, mode os.FileMode) {
	tb.Helper()
	src, err := os.Open(from) //nolint:gosec // the test binary
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, mode) //nolint:gosec // a test's directory
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		tb.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		tb.Fatal(err)
	}
}

func grepLines(s, substr string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if strings.Contains(line, substr) {
			b.WriteString(line)
		}
	}
	return b.String()
}

func statUID(fi os.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return math.MaxUint32
}

func sysProcAttrAs(uid, gid uint32) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}, Pdeathsig: syscall.SIGKILL}
}
