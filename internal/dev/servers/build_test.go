package servers

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestEnsureBuilt(t *testing.T) {
	script := []byte("#!/bin/sh\n")
	writeTool := func(_ context.Context, out string) error { return os.WriteFile(out, script, 0o755) } //nolint:gosec // an executable
	errBuild := errors.New("compiler says no")
	tests := []struct {
		name       string
		prepare    func(t *testing.T, bin string)
		build      func(ctx context.Context, out string) error
		callers    int
		wantBuilds int32
		wantErr    error
	}{
		{name: "concurrent callers build once", build: writeTool, callers: 8, wantBuilds: 1},
		{name: "an existing binary is kept", callers: 2, wantBuilds: 0, build: writeTool,
			prepare: func(t *testing.T, bin string) { must(t, os.WriteFile(bin, script, 0o755)) }}, //nolint:gosec // an executable
		{name: "a file that is not executable is rebuilt", callers: 1, wantBuilds: 1, build: writeTool,
			prepare: func(t *testing.T, bin string) { must(t, os.WriteFile(bin, nil, 0o600)) }},
		{name: "leftovers of a dead builder are removed", callers: 1, wantBuilds: 1, build: writeTool,
			prepare: func(t *testing.T, bin string) {
				must(t, os.MkdirAll(filepath.Join(filepath.Dir(bin), ".build-123", "sub"), 0o750))
			}},
		{name: "a failed build leaves nothing", callers: 3, wantBuilds: 3, wantErr: errBuild,
			build: func(context.Context, string) error { return errBuild }},
		{name: "a build that writes nothing fails", callers: 1, wantBuilds: 1, wantErr: errNoExecutable,
			build: func(context.Context, string) error { return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "cache", "tool")
			must(t, os.MkdirAll(filepath.Dir(bin), 0o750))
			if tt.prepare != nil {
				tt.prepare(t, bin)
			}
			var builds atomic.Int32
			build := func(ctx context.Context, out string) error {
				builds.Add(1)
				return tt.build(ctx, out)
			}
			ctx := testContext(t, 10*time.Second)
			errs := make(chan error, tt.callers)
			var wg sync.WaitGroup
			for range tt.callers {
				wg.Go(func() { errs <- ensureBuilt(ctx, bin, build) })
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("ensureBuilt: %v, want %v", err, tt.wantErr)
				}
			}
			if got := builds.Load(); got != tt.wantBuilds {
				t.Errorf("%d builds, want %d", got, tt.wantBuilds)
			}
			if got := isExecutable(bin); got != (tt.wantErr == nil) {
				t.Errorf("executable at %s: %v, want %v", bin, got, tt.wantErr == nil)
			}
			if left, _ := filepath.Glob(filepath.Join(filepath.Dir(bin), ".build-*")); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

// TestEnsureBuiltWaitEnds: a caller waiting for another process's build gives up at
// its deadline.
func TestEnsureBuiltWaitEnds(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tool")
	unlock, err := lockFile(testContext(t, time.Second), bin+".lock")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = ensureBuilt(ctx, bin, func(context.Context, string) error { return errors.New("built without the lock") })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ensureBuilt: %v, want %v", err, context.DeadlineExceeded)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testContext is a context that ends with the test or after d.
func testContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
