package testenv

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// What the fast loop does not start. `go test -short ./...` is the loop a change runs
// first: it starts redis-server and NATS, nothing heavier. Each harness function that
// starts one of these calls SkipUnderShort first, so a test needing it skips there and
// runs in the full test command (scripts/test.sh), which never passes -short.
const (
	NeedsChromium = "Chromium"
	NeedsDocker   = "Docker"
	NeedsHydra    = "Hydra"
	NeedsJaeger   = "Jaeger"
)

// SkipUnderShort skips tb under -short, naming who (the harness function or helper
// that would start it) and what it needs (NeedsChromium, …): "StartHydra: needs Hydra;
// skipped under -short". Without -short it does nothing.
func SkipUnderShort(tb testing.TB, who, needs string) {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("%s: needs %s; skipped under -short", who, needs)
	}
}

// SkipSlowUnderShort skips tb under -short when it is slow by design — it waits out a
// timeout, a staleness bound or a failover whatever the machine's speed — saying why:
// "waits out the ping timeout (25s); skipped under -short". The fast loop keeps to
// seconds; the test command runs it.
func SkipSlowUnderShort(tb testing.TB, why string) {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("%s; skipped under -short", why)
	}
}

// SkipMainUnderShort is SkipUnderShort for a TestMain whose shared fixture, which every
// test of its package uses, needs what needs names: under -short it says so on standard
// error, sets -test.skip to every test and reports true; the TestMain then starts
// nothing and returns m.Run(), which runs no test (go test says "[no tests to run]").
// Without -short it reports false.
func SkipMainUnderShort(who, needs string) bool {
	if !flag.Parsed() {
		flag.Parse() // testing.Short reads the flags; m.Run does not parse them again
	}
	if !testing.Short() {
		return false
	}
	fmt.Fprintf(os.Stderr, "%s: needs %s; skipped under -short\n", who, needs)
	if err := flag.Set("test.skip", "."); err != nil {
		panic(err) // the testing package defines the flag: m.Run would refuse it too
	}
	return true
}
