package stacktest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// AuditWait bounds each wait for events to reach the audit stream.
const AuditWait = 15 * time.Second

// AuditStream is the stack's audit stream (bus.AuditStream), which the stack made at
// its start as a platform does, read as the platform's user.
func (c *Client) AuditStream(tb testing.TB) jetstream.Stream {
	tb.Helper()
	nc, err := c.St.ConnectPlatform("audit-reader " + tb.Name())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := js.Stream(c.Context(tb), bus.AuditStream)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// StoredMsgs reads every message s holds now on filter, in the stream's order.
func (c *Client) StoredMsgs(tb testing.TB, s jetstream.Stream, filter string) []jetstream.Msg {
	tb.Helper()
	ctx := c.Context(tb)
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		tb.Fatal(err)
	}
	// Each read makes a consumer, and a test that waits reads every few milliseconds:
	// left to their inactivity timeout, they would reach the server's limit of
	// consumers a stream may have (CI saw "maximum consumers limit reached").
	defer func() { _ = s.DeleteConsumer(ctx, cons.CachedInfo().Name) }()
	var out []jetstream.Msg
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		if info.NumPending == 0 {
			return out
		}
		batch, err := cons.Fetch(int(min(info.NumPending, 1000)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			tb.Fatal(err)
		}
		for m := range batch.Messages() {
			out = append(out, m)
		}
		if err := batch.Error(); err != nil {
			tb.Fatal(err)
		}
	}
}

// ViewEvent is a view event read from the stream: decoded, and its bytes as stored.
type ViewEvent struct {
	audit.View
	Raw []byte
}

// ViewEvents waits until s holds at least want view events naming agent that pass keep
// (nil keeps all) — on the agent's subject or, for a decision that read no agent's
// record, on ….view._ — then returns them in order.
func (c *Client) ViewEvents(tb testing.TB, s jetstream.Stream, agent string, want int, keep func(audit.View) bool) []ViewEvent {
	tb.Helper()
	var out []ViewEvent
	testenv.WaitFor(tb, AuditWait, strconv.Itoa(want)+" audit events of "+agent, func() bool {
		out = out[:0]
		for _, m := range c.StoredMsgs(tb, s, c.St.NS.AuditViewWildcard()) {
			var ev audit.View
			if err := json.Unmarshal(m.Data(), &ev); err != nil {
				tb.Fatalf("event %s: %v", m.Data(), err)
			}
			if ev.Agent != agent || (keep != nil && !keep(ev)) {
				continue
			}
			subject := c.St.NS.AuditView(agent)
			if ev.Team == "" {
				subject = c.St.NS.AuditView(bus.AuditNoAgent)
			}
			if m.Subject() != subject {
				tb.Fatalf("event %s on %s, want %s", m.Data(), m.Subject(), subject)
			}
			out = append(out, ViewEvent{ev, slices.Clone(m.Data())})
		}
		return len(out) >= want
	})
	return out
}

// AuditEventWithin waits until s holds a view event on subject that match accepts.
func (c *Client) AuditEventWithin(tb testing.TB, s jetstream.Stream, subject string, match func(audit.View) bool) audit.View {
	tb.Helper()
	var found audit.View
	testenv.WaitFor(tb, AuditWait, "an audit event on "+subject, func() bool {
		for _, m := range c.StoredMsgs(tb, s, subject) {
			var ev audit.View
			if err := json.Unmarshal(m.Data(), &ev); err == nil && match(ev) {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

// SequencesWhole waits until, for every boot in s, the events hold each number from
// its smallest to its largest exactly once: no gap, no repeat (what `agentfy audit
// verify` checks). It returns how many events and boots it read.
func (c *Client) SequencesWhole(tb testing.TB, s jetstream.Stream) (events, boots int) {
	tb.Helper()
	var problem string
	testenv.WaitFor(tb, AuditWait, "every boot's sequence whole", func() bool {
		seqs := map[string][]uint64{}
		msgs := c.StoredMsgs(tb, s, c.St.NS.AuditWildcard())
		for _, m := range msgs {
			var o struct{ audit.Origin }
			if err := json.Unmarshal(m.Data(), &o); err != nil {
				tb.Fatal(err)
			}
			seqs[o.Boot] = append(seqs[o.Boot], o.Seq)
		}
		problem = ""
		for boot, ss := range seqs {
			slices.Sort(ss)
			for i := 1; i < len(ss); i++ {
				if ss[i] != ss[i-1]+1 {
					problem = fmt.Sprintf("boot %s: %d then %d", boot, ss[i-1], ss[i])
				}
			}
		}
		events, boots = len(msgs), len(seqs)
		return problem == ""
	})
	if problem != "" {
		tb.Fatal(problem)
	}
	return events, boots
}

// LoseAuditStream deletes the stack's audit stream as the platform's user, an outage of
// the trail, and returns remake, which makes it again (stack.Stack.MakeAuditStream);
// when the test does not call remake, the stream is made again at cleanup.
func (c *Client) LoseAuditStream(tb testing.TB) (remake func()) {
	tb.Helper()
	ctx := c.Context(tb)
	nc, err := c.St.ConnectPlatform("audit-breaker " + tb.Name())
	if err != nil {
		tb.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	if err := js.DeleteStream(ctx, bus.AuditStream); err != nil {
		tb.Fatal(err)
	}
	remade := false
	tb.Cleanup(func() {
		if !remade {
			if err := c.St.MakeAuditStream(context.WithoutCancel(ctx)); err != nil {
				tb.Errorf("make the audit stream again: %v", err)
			}
		}
	})
	return func() {
		tb.Helper()
		if err := c.St.MakeAuditStream(ctx); err != nil {
			tb.Fatal(err)
		}
		remade = true
	}
}
