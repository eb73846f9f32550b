package broker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestSweepProfiles: a profile whose broker died (its pid gone, or reused by another
// process) and an old one without an owner are removed; this live process's and a
// fresh ownerless one (a launch in progress) are kept.
func TestSweepProfiles(t *testing.T) {
	parent := t.TempDir()
	// A process that has exited: its pid is free, or taken by another process later.
	done := exec.CommandContext(context.Background(), "true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	dead := done.ProcessState.Pid()
	mk := func(name, owner string, age time.Duration) string {
		t.Helper()
		dir := filepath.Join(parent, profilePrefix+name)
		if err := os.MkdirAll(filepath.Join(dir, "Default"), 0o700); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		at := time.Now().Add(-age)
		if err := os.Chtimes(dir, at, at); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	tests := []struct {
		name     string
		dir      string
		wantGone bool
	}{
		{"dead broker", mk("dead", processIdentity(dead), 0), true},
		{"pid reused by another process", mk("reused", fmt.Sprintf("%d 1", os.Getpid()), 0), true},
		{"live broker (this process)", mk("live", processIdentity(os.Getpid()), time.Hour), false},
		{"old without an owner", mk("orphan", "", 2*orphanAge), true},
		{"fresh without an owner", mk("starting", "", 0), false},
		{"garbage owner", mk("garbage", "not a pid", time.Hour), false},
	}
	// What an earlier sweep claimed and could not remove whole (a dying Chromium's child
	// still wrote into it) goes too.
	claimed := filepath.Join(parent, sweptPrefix+"earlier")
	if err := os.MkdirAll(filepath.Join(claimed, "Default"), 0o700); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(parent, "someone-else")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if n := SweepProfiles(parent); n != 3 {
		t.Errorf("removed %d profiles, want 3", n)
	}
	for _, tt := range tests {
		_, err := os.Stat(tt.dir)
		if gone := os.IsNotExist(err); gone != tt.wantGone {
			t.Errorf("%s: gone %v, want %v", tt.name, gone, tt.wantGone)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a directory that is no profile was touched: %v", err)
	}
	if _, err := os.Stat(claimed); !os.IsNotExist(err) {
		t.Errorf("a profile an earlier sweep claimed is still there (%v)", err)
	}
	if left, _ := filepath.Glob(filepath.Join(parent, sweptPrefix+"*")); len(left) != 0 {
		t.Errorf("claimed profiles left behind: %v", left)
	}
}
