package broker

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// DefaultChromiumUser is the account a broker that runs as root starts Chromium as,
// when the operator names none (LaunchConfig.User): a system user without a shell or
// a home, which scripts/setup.sh makes.
const DefaultChromiumUser = "agentfy-chromium"

// Errors of a launch that cannot be made safe. The broker refuses to start with them
// rather than run the agent's pages with more than they need.
var (
	// ErrNoSandbox is a Chromium that cannot build its sandbox: its renderers would run
	// the open internet's code with the broker's rights.
	ErrNoSandbox = errors.New("chromium cannot build its sandbox")
	// ErrNoUser is a broker running as root with no unprivileged user to start
	// Chromium as: Chromium never runs as uid 0.
	ErrNoUser = errors.New("no unprivileged user to run chromium as")
)

// noSandboxHint is what an operator can do about ErrNoSandbox, after what is missing.
const noSandboxHint = "Chromium's sandbox needs unprivileged user namespaces: on the host, sysctl user.max_user_namespaces > 0 " +
	"(and kernel.unprivileged_userns_clone=1, kernel.apparmor_restrict_unprivileged_userns=0 where they exist); " +
	"in a container, the browser's seccomp profile deploy/seccomp/chromium.json (Docker's default refuses the calls); " +
	"or AGENTFY_CHROMIUM_SANDBOX=off to run it unsandboxed, which is not safe for the open internet"

// chromiumUser is the account Chromium runs as.
type chromiumUser struct {
	name     string
	uid, gid uint32
	// switched is whether Chromium runs as another user than the broker: the broker
	// is root and starts it as this one.
	switched bool
}

// resolveChromiumUser decides whom Chromium runs as. A broker that is not root starts
// Chromium as itself, and refuses a name that is not its own (it could not switch). A
// root broker starts it as name (a user name or a numeric uid; empty means
// DefaultChromiumUser), which must exist and be neither uid 0 nor of group 0.
func resolveChromiumUser(name string) (chromiumUser, error) {
	euid := os.Geteuid()
	if euid != 0 {
		u := chromiumUser{name: strconv.Itoa(euid), uid: uint32(euid), gid: uint32(os.Getegid())} //nolint:gosec // ids are never negative
		if name == "" {
			return u, nil
		}
		want, err := lookupUser(name)
		if err != nil || want.Uid != u.name {
			return chromiumUser{}, fmt.Errorf("%w: the broker runs as uid %d and cannot start chromium as %q; leave the chromium user unset, or run the broker as root", ErrNoUser, euid, name)
		}
		return u, nil
	}
	if name == "" {
		name = DefaultChromiumUser
	}
	u, err := lookupUser(name)
	if err != nil {
		return chromiumUser{}, fmt.Errorf("%w: the broker runs as root and user %q does not exist: create it (useradd --system --no-create-home --shell /usr/sbin/nologin %s; scripts/setup.sh does) or name another with AGENTFY_CHROMIUM_USER", ErrNoUser, name, DefaultChromiumUser)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	switch {
	case err1 != nil || err2 != nil:
		return chromiumUser{}, fmt.Errorf("%w: user %q has no numeric ids", ErrNoUser, name)
	case uid == 0 || gid == 0:
		return chromiumUser{}, fmt.Errorf("%w: user %q is uid %d, gid %d: chromium never runs as root or in root's group", ErrNoUser, name, uid, gid)
	}
	return chromiumUser{name: u.Username, uid: uint32(uid), gid: uint32(gid), switched: true}, nil
}

// lookupUser finds a user by name, or by uid when name is a number.
func lookupUser(name string) (*user.User, error) {
	if _, err := strconv.ParseUint(name, 10, 32); err == nil {
		return user.LookupId(name)
	}
	return user.Lookup(name)
}

// credential is what the fork of Chromium switches to: nil when Chromium runs as the
// broker. Supplementary groups are dropped (none is kept).
func (u chromiumUser) credential() *syscall.Credential {
	if !u.switched {
		return nil
	}
	return &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: []uint32{}}
}

// checkReachable reports an error when user u could not reach dir: each directory
// above it must let u search it, or Chromium fails with an obscure error about its
// profile. A broker that does not switch users reaches its own directories.
func (u chromiumUser) checkReachable(dir string) error {
	if !u.switched {
		return nil
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if ok {
			mode := fi.Mode().Perm()
			searchable := mode&0o001 != 0 ||
				(st.Uid == u.uid && mode&0o100 != 0) ||
				(st.Gid == u.gid && mode&0o010 != 0)
			if !searchable {
				return fmt.Errorf("chromium's user %s (uid %d) cannot reach %s (mode %v): choose a profile directory it can (AGENTFY_BROKER_PROFILE_DIR), or chmod o+x %s", u.name, u.uid, dir, mode, d)
			}
		}
		if parent := filepath.Dir(d); parent == d {
			return nil
		}
	}
}

// sandboxDiagnosis says why this machine refuses user namespaces, from the settings
// that decide it; empty when none of them is the cause.
func sandboxDiagnosis() string {
	var causes []string
	read := func(path string) (string, bool) {
		b, err := os.ReadFile(path) //nolint:gosec // a fixed kernel setting
		return strings.TrimSpace(string(b)), err == nil
	}
	if v, ok := read("/proc/sys/user/max_user_namespaces"); ok && v == "0" {
		causes = append(causes, "user.max_user_namespaces is 0")
	}
	if v, ok := read("/proc/sys/kernel/unprivileged_userns_clone"); ok && v == "0" {
		causes = append(causes, "kernel.unprivileged_userns_clone is 0")
	}
	if v, ok := read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); ok && v == "1" {
		causes = append(causes, "kernel.apparmor_restrict_unprivileged_userns is 1")
	}
	return strings.Join(causes, ", ")
}

// chromiumTempDir is Chromium's TMPDIR, where it makes its singleton socket and, with
// --disable-dev-shm-usage, its shared memory: the system's temporary directory when
// every user may make files of their own in it (sticky and world-writable, as /tmp
// is), else the directory tempDir of the user data directory data. The first is
// preferred for its short path: a socket's path has at most 107 bytes, and Chromium
// refuses to start when its socket's would be longer, which a profile directory of a
// few levels makes it.
func chromiumTempDir(data string) string {
	tmp := os.TempDir()
	if fi, err := os.Stat(tmp); err == nil && fi.IsDir() && fi.Mode()&os.ModeSticky != 0 && fi.Mode().Perm()&0o003 == 0o003 {
		return tmp
	}
	return filepath.Join(data, tempDir)
}

// noSandboxError is the error of a Chromium that said it has no usable sandbox.
func noSandboxError() error {
	cause := sandboxDiagnosis()
	if cause == "" {
		cause = "user namespaces are refused to its user (a seccomp filter, a container runtime or a nested namespace's limit)"
	}
	return fmt.Errorf("%w: %s. %s", ErrNoSandbox, cause, noSandboxHint)
}

// chromiumEnvNames are the variables of the caller's environment Chromium may have: the
// locale and the time zone, which a page can see anyway. Every other variable of the
// broker — its pass, the collector's keys (OTEL_*), proxies, its configuration — stays
// out of Chromium's /proc/PID/environ; Chromium gets an environment of the broker's
// making (see chromiumEnv).
var chromiumEnvNames = []string{"LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_NUMERIC", "LC_TIME", "LC_COLLATE", "LC_MONETARY", "TZ"}

// chromiumPath is the PATH Chromium and Debian's wrapper script run with.
const chromiumPath = "/usr/local/bin:/usr/bin:/bin"

// chromiumEnv is Chromium's whole environment: PATH, HOME and the XDG directories
// inside the profile (Chromium keeps its crash database and caches under them; the
// profile is removed at the end), TMPDIR tmp, and of from only the variables named in
// chromiumEnvNames.
func chromiumEnv(from []string, home, tmp string) []string {
	env := []string{
		"PATH=" + chromiumPath,
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"TMPDIR=" + tmp,
	}
	for _, kv := range from {
		name, _, _ := strings.Cut(kv, "=")
		for _, n := range chromiumEnvNames {
			if name == n {
				env = append(env, kv)
				break
			}
		}
	}
	return env
}
