package servers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// ToolDir finds the tool module internal/tools/<name>: beside this file's package when
// the source path is known, otherwise from the root module of the working directory.
func ToolDir(name string) (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		dir := filepath.Join(filepath.Dir(file), "..", "..", "tools", name)
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
	}
	// A -trimpath build has no absolute source path; tests run inside the module.
	out, err := exec.Command("go", "env", "GOMOD").Output() //nolint:noctx // go env answers at once
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("internal/tools/%s not found: not inside the agentfy module", name)
	}
	dir := filepath.Join(filepath.Dir(gomod), "internal", "tools", name)
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("internal/tools/%s not found: %w", name, err)
	}
	return dir, nil
}

// toolBinaryPath is where the binary name built from the tool module in dir with
// buildArgs lives: the user's cache directory, under a name with the version and a hash
// of the module's go.mod, go.sum and the build flags, so that a changed pin builds anew.
func toolBinaryPath(dir, name, version string, buildArgs []string) (string, error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(dir, f)) //nolint:gosec // the tool module's own files
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	fmt.Fprintf(h, "%q %s/%s\n", buildArgs, runtime.GOOS, runtime.GOARCH)
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("user cache dir: %w", err)
	}
	return filepath.Join(cache, "agentfy", name+"-"+version+"-"+hex.EncodeToString(h.Sum(nil)[:6]), name), nil
}

// ensureBuilt makes sure an executable exists at bin, calling build at most once across
// processes: under an exclusive lock on bin+".lock", the builder writes into a temporary
// directory beside bin and renames the result to bin, so no caller ever sees half a
// binary. What a builder that died left behind is removed by the next one.
func ensureBuilt(ctx context.Context, bin string, build func(ctx context.Context, out string) error) error {
	if isExecutable(bin) {
		return nil
	}
	dir := filepath.Dir(bin)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	unlock, err := lockFile(ctx, bin+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if isExecutable(bin) { // another process built it while we waited
		return nil
	}
	stale, _ := filepath.Glob(filepath.Join(dir, ".build-*"))
	for _, d := range stale {
		_ = os.RemoveAll(d)
	}
	tmp, err := os.MkdirTemp(dir, ".build-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	out := filepath.Join(tmp, filepath.Base(bin))
	if err := build(ctx, out); err != nil {
		return err
	}
	if !isExecutable(out) {
		return fmt.Errorf("%w at %s", errNoExecutable, out)
	}
	return os.Rename(out, bin)
}

// errNoExecutable: a build reported success but wrote no executable.
var errNoExecutable = errors.New("the build left no executable")

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// lockFile takes an exclusive flock on path, polling so that the wait ends with ctx.
// The lock is per open file, so it excludes other goroutines of this process too.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600) //nolint:gosec // our cache directory
	if err != nil {
		return nil, err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) //nolint:gosec // a file descriptor fits an int
		if err == nil {
			return func() { _ = f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("lock %s (another build still running?): %w", path, ctx.Err())
		case <-tick.C:
		}
	}
}

// buildTool builds pkg of the tool module in dir into bin with `go args… -o bin pkg`
// and env added to this process's environment, unless bin is there already
// (ensureBuilt), saying through logf that it builds and how long that took (cold:
// how long it takes from nothing).
func buildTool(ctx context.Context, dir, bin, pkg string, args, env []string, cold string, logf func(format string, args ...any)) error {
	name := filepath.Base(bin)
	return ensureBuilt(ctx, bin, func(ctx context.Context, out string) error {
		logf("building %s into %s (%s)", name, bin, cold)
		start := time.Now()
		args := append(append([]string(nil), args...), "-o", out, pkg)
		cmd := exec.CommandContext(ctx, "go", args...) //nolint:gosec // the go tool, fixed arguments
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		if output, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s (in %s): %w\n%s", strings.Join(args, " "), dir, err, output)
		}
		logf("built %s in %v", name, time.Since(start).Round(time.Second))
		return nil
	})
}
