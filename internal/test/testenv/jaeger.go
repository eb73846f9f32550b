package testenv

import (
	"context"
	"testing"

	"github.com/agentfy/agentfy/internal/dev/servers"
)

// JaegerVersion is the Jaeger release the tests run (servers.JaegerVersion).
const JaegerVersion = servers.JaegerVersion

// The tests' names of servers' Jaeger and its query API's answers.
type (
	Jaeger      = servers.Jaeger
	JaegerTrace = servers.JaegerTrace
	JaegerSpan  = servers.JaegerSpan
)

// ErrTraceNotFound: the query API knows no trace of that id (yet).
var ErrTraceNotFound = servers.ErrTraceNotFound

// JaegerBinary returns the path of the jaeger binary (servers.BuildJaeger), building it
// if it is missing, logging through tb. A failed build fails the test with the
// compiler's output; it is never skipped but under -short, where no Jaeger runs
// (SkipUnderShort).
func JaegerBinary(tb testing.TB) string {
	tb.Helper()
	SkipUnderShort(tb, "JaegerBinary", NeedsJaeger)
	bin, err := servers.BuildJaeger(context.Background(), tb.Logf)
	if err != nil {
		tb.Fatalf("jaeger binary: %v", err)
	}
	return bin
}

// StartJaeger runs Jaeger from JaegerBinary (servers.RunJaeger) until the test ends (a
// failing test also gets the tail of its log).
func StartJaeger(tb testing.TB) *Jaeger {
	tb.Helper()
	bin := JaegerBinary(tb)
	ctx, cancel := context.WithTimeout(context.Background(), servers.JaegerStartTimeout)
	defer cancel()
	j, err := servers.RunJaeger(ctx, bin, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		j.Stop()
		if tb.Failed() {
			tb.Logf("jaeger log (tail):\n%s", j.LogTail())
		}
	})
	return j
}
