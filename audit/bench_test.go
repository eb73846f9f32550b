package audit_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// BenchmarkFrame prices what a frame's audit event costs the view that serves it, on a
// real embedded nats-server with the deployment's roles and JetStream on a file store
// (the stream made as the platform makes it, audit.Stream). durable: Frame returns only
// once the stream acknowledged the event, so each operation is the whole round trip —
// encode, publish, the server's append to the file store, the acknowledgement back
// through the replica's inbox — and the benchmark checks afterwards that the stream
// holds every event. best_effort: Frame queues the event and returns; the drain sends
// it on core NATS. A view's frame comes milliseconds after the last, when the drain has
// long sent the last event, so the loop waits for the drain to take each event with
// the clock stopped: a loop that outran it would price the lock's contention and the
// drops of a full buffer (reported as dropped/op, which must stay 0), not a view's
// Frame.
func BenchmarkFrame(b *testing.B) {
	for _, bc := range []struct {
		name       string
		bestEffort bool
	}{
		{"durable", false},
		{"best_effort", true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p, stream := benchPublisher(b, bc.bestEffort)
			ctx := testenv.Context(b, 10*time.Minute)
			ev := audit.View{ViewerKind: audit.ViewerMember, ViewerID: "u-alice", Agent: "agent-scout", Team: "team-atlas", Organisation: "org-acme", Session: "s1"}
			// One acknowledged frame before the clock starts: the connection, the
			// stream's first block and the client's reply subscription are set up.
			if err := p.Frame(ctx, ev); err != nil {
				b.Fatal(err)
			}
			drained(b, p, 1)
			before := p.Published()
			want := before
			b.ReportAllocs()
			for b.Loop() {
				if err := p.Frame(ctx, ev); err != nil {
					b.Fatal(err)
				}
				if want++; bc.bestEffort {
					b.StopTimer()
					drained(b, p, want)
					b.StartTimer()
				}
			}
			b.StopTimer()
			n := uint64(b.N)
			if err := p.Close(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(p.Dropped())/float64(n), "dropped/op")
			if bc.bestEffort {
				if p.Dropped() != 0 {
					b.Fatalf("%d of %d events dropped", p.Dropped(), n+1)
				}
				return
			}
			// Every Frame that returned nil was acknowledged, so the stream holds them
			// all: the warm-up's and the loop's.
			if got := p.Published() - before; got != n {
				b.Fatalf("%d events acknowledged for %d frames", got, n)
			}
			info, err := stream.Info(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if info.State.Msgs != n+1 || p.Dropped() != 0 {
				b.Fatalf("the stream holds %d events for %d frames (%d dropped)", info.State.Msgs, n+1, p.Dropped())
			}
		})
	}
}

// benchPublisher connects a replica's publisher (best effort or durable) to a server
// of the deployment's roles with the audit stream made, as the tests do.
func benchPublisher(b *testing.B, bestEffort bool) (*audit.Publisher, jetstream.Stream) {
	b.Helper()
	ns := namespace(b)
	url, secrets, platform := server(b, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream := makeStream(b, ctx, platform, ns)
	return connect(b, url, ns, secrets, bus.RoleReplica, audit.Options{BestEffort: bestEffort}), stream
}

// drained waits until p has sent want events, yielding the processor to the drain: a
// poll of testenv.WaitFor's 10 ms would stretch a run of microsecond operations to
// hours.
func drained(b *testing.B, p *audit.Publisher, want uint64) {
	deadline := time.Now().Add(audit.FlushTimeout)
	for p.Published() < want {
		if time.Now().After(deadline) {
			b.Fatalf("the drain sent %d events of %d within %v", p.Published(), want, audit.FlushTimeout)
		}
		runtime.Gosched()
	}
}
