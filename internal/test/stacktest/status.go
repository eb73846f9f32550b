package stacktest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/agentfy/agentfy/session"
)

// statusEvents bounds the events a StatusStream queues for a test that reads slowly.
const statusEvents = 64

// StatusEvent is one event of the status feed. Err is set, and nothing else, for an
// event that is not JSON or lacks agentId, status or live.
type StatusEvent struct {
	AgentID   string
	SessionID string // empty before any session
	Status    session.Status
	Live      bool
	Err       error
}

// errMalformedEvent is the Err of an event without one of the fields every event has.
var errMalformedEvent = errors.New("stacktest: status event without agentId, status or live")

// StatusStream opens agent's status feed on base (a replica's URL) with bearer and
// delivers its events until ctx ends or the server closes the feed; then the channel
// is closed. It queues up to 64 events for a test that reads slowly. An answer other than 200 text/event-stream with Cache-Control: no-store
// fails the test.
func StatusStream(ctx context.Context, tb testing.TB, base, agent, bearer string) <-chan StatusEvent {
	tb.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+StatusPath(agent), nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // the reader goroutine closes it
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Cache-Control") != "no-store" {
		_ = resp.Body.Close()
		tb.Fatalf("status feed: %d %v", resp.StatusCode, resp.Header)
	}
	out := make(chan StatusEvent, statusEvents)
	go func() {
		defer close(out)
		defer func() { _ = resp.Body.Close() }()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				select {
				case out <- parseStatusEvent(data):
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// parseStatusEvent decodes one event's data.
func parseStatusEvent(data string) StatusEvent {
	var raw struct {
		AgentID   *string         `json:"agentId"`
		SessionID string          `json:"sessionId"`
		Status    *session.Status `json:"status"`
		Live      *bool           `json:"live"`
	}
	if err := json.Unmarshal([]byte(data), &raw); err != nil {
		return StatusEvent{Err: err}
	}
	if raw.AgentID == nil || raw.Status == nil || raw.Live == nil {
		return StatusEvent{Err: errMalformedEvent}
	}
	return StatusEvent{AgentID: *raw.AgentID, SessionID: raw.SessionID, Status: *raw.Status, Live: *raw.Live}
}
