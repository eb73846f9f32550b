package stack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"

	"github.com/agentfy/agentfy/broker"
)

// EnsureInstalled runs the repository's idempotent setup (scripts/setup.sh --runtime)
// when redis-server or Chromium is missing, or, as root, the user the broker runs
// Chromium as: what the development commands (agentfy-dev, agentfy-bench) need
// before they start a stack. progress says that it installs.
func EnsureInstalled(ctx context.Context, progress func(string, ...any)) error {
	_, redisErr := exec.LookPath("redis-server")
	_, chromeErr := os.Stat(broker.DefaultChromium)
	var userErr error
	if os.Geteuid() == 0 {
		_, userErr = user.Lookup(broker.DefaultChromiumUser)
	}
	if redisErr == nil && chromeErr == nil && userErr == nil {
		return nil
	}
	progress("installing what is missing (scripts/setup.sh)")
	root, err := FindRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "setup.sh"), "--runtime") //nolint:gosec // the repository's own script
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	return nil
}

// WriteFileAtomic writes b to path (mode 0600) through a temporary file beside it, so
// a reader never sees half of it: the development commands' ready file and reports.
// The path is the developer's own flag.
func WriteFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil { //nolint:gosec // see above
		return err
	}
	return os.Rename(tmp, path)
}
