package bench

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
)

// processCPU is this process's user and system CPU time (getrusage, microseconds).
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkViewPath times whole views (the request at replica-a, the worker on
// replica-b, the broker's real capture, the viewer's decode) and, as the baseline, bare
// CDP captures of the same tab, on one stack started once. Besides ns/op it reports
// go-cpu-ms/op: the CPU time of this process (every Go part of the path, the embedded
// NATS server and the viewer; not Chromium, not redis-server) per operation. Profile
// it with -cpuprofile to see where a view's Go CPU goes.
func BenchmarkViewPath(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	log := zerolog.New(os.Stderr).Level(zerolog.ErrorLevel)
	st := stacktest.Start(b, stack.Options{Replicas: 2, Deployment: benchDeployment, Chromium: os.Getenv("AGENTFY_CHROMIUM"), Log: log}).St
	bs, err := startBenchSession(ctx, st, benchAgent, 1, os.Getenv("AGENTFY_CHROMIUM"), benchPage, log)
	if err != nil {
		b.Fatal(err)
	}
	defer bs.Close(ctx)
	token, err := st.Token(benchUser, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	v := newViewer(benchUser, token, st)
	base := st.Replicas[0].URL
	run := func(b *testing.B, op func() error) {
		for range 3 { // warm the connections and the tab
			if err := op(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		cpu := processCPU(b)
		b.ResetTimer()
		for b.Loop() {
			if err := op(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(processCPU(b)-cpu)/float64(time.Millisecond)/float64(b.N), "go-cpu-ms/op")
	}
	b.Run("view", func(b *testing.B) {
		run(b, func() error {
			if err := v.openGate(ctx, benchAgent); err != nil {
				return err
			}
			_, err := v.view(ctx, base, benchAgent)
			return err
		})
	})
	b.Run("bare", func(b *testing.B) {
		run(b, func() error {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := bs.bare.Capture(cctx)
			return err
		})
	})
}
