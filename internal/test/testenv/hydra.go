package testenv

import (
	"context"
	"testing"

	"github.com/agentfy/agentfy/internal/dev/servers"
)

// HydraVersion is the Ory Hydra release the tests run (servers.HydraVersion).
const HydraVersion = servers.HydraVersion

// HydraAccessTokenKeySet is the key set whose newest key signs Hydra's JWT access
// tokens (servers.HydraAccessTokenKeySet).
const HydraAccessTokenKeySet = servers.HydraAccessTokenKeySet

// Hydra is an Ory Hydra run for a test (servers.Hydra) that the test stops at its end.
type Hydra struct {
	*servers.Hydra
}

// HydraBinary returns the path of the hydra binary (servers.BuildHydra), building it
// if it is missing, logging through tb. A failed build fails the test with the
// compiler's output; it is never skipped but under -short, where no Hydra runs
// (SkipUnderShort).
func HydraBinary(tb testing.TB) string {
	tb.Helper()
	SkipUnderShort(tb, "HydraBinary", NeedsHydra)
	bin, err := servers.BuildHydra(context.Background(), tb.Logf)
	if err != nil {
		tb.Fatalf("hydra binary: %v", err)
	}
	return bin
}

// StartHydra runs Hydra in memory (servers.StartHydra) in the test's temporary
// directory and stops it at cleanup (a failing test also gets the tail of its log).
func StartHydra(tb testing.TB) *Hydra {
	tb.Helper()
	return startHydra(tb, false)
}

// StartPersistentHydra is StartHydra with its state in a SQLite file
// (servers.HydraOptions.Persistent), so that Restart brings the same provider back.
func StartPersistentHydra(tb testing.TB) *Hydra {
	tb.Helper()
	return startHydra(tb, true)
}

func startHydra(tb testing.TB, persistent bool) *Hydra {
	tb.Helper()
	bin := HydraBinary(tb)
	h, err := servers.StartHydra(context.Background(), servers.HydraOptions{Bin: bin, Dir: tb.TempDir(), Persistent: persistent})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		h.Stop()
		if tb.Failed() {
			tb.Logf("hydra log (tail):\n%s", h.LogTail())
		}
	})
	return &Hydra{h}
}

// Restart is servers.Hydra.Restart that fails the test when Hydra does not come back.
func (h *Hydra) Restart(tb testing.TB) {
	tb.Helper()
	if err := h.Hydra.Restart(context.Background()); err != nil {
		tb.Fatal(err)
	}
}
