package stacktest

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Watcher records every message on a NATS subject, for tests that look at the bus as a
// person does with `nats sub`.
type Watcher struct {
	nc  *nats.Conn
	sub *nats.Subscription
	got []*nats.Msg
}

// Watch subscribes nc to subject and returns once the server has the subscription: every
// message published on subject from then on is recorded. The subscription ends with the
// test.
func Watch(tb testing.TB, nc *nats.Conn, subject string) *Watcher {
	tb.Helper()
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	return &Watcher{nc: nc, sub: sub}
}

// Messages returns every message recorded so far. The messages the server processed
// before the call are all there: a round trip to the server puts them in the
// subscription's queue ahead of its answer, and they are read from that queue here,
// in order, rather than by a callback that may not have run yet. (A message another
// client has published is processed once the publisher flushed, or once its
// requester got the reply.)
func (w *Watcher) Messages(tb testing.TB) []*nats.Msg {
	tb.Helper()
	if err := w.nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	n, _, err := w.sub.Pending()
	if err != nil {
		tb.Fatal(err)
	}
	for range n {
		m, err := w.sub.NextMsg(time.Second) // queued already: the deadline only bounds a bug
		if err != nil {
			tb.Fatalf("a queued message: %v", err)
		}
		w.got = append(w.got, m)
	}
	return w.got
}
