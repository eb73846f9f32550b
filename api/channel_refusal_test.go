package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/wire"
)

// TestChannelRefusalsAreJSON: the worker channel refuses an upgrade, through a
// replica's listener, like every /v1 route answers an error — its row of the failure
// table in the JSON error body, with no-store — and with the statuses a worker reads
// (401: its session ended, 403: not a worker pass, 426: no WebSocket handshake). A
// session that idled out while its worker was away (wire.FailChannelSessionEnded) is
// the channel's own tests' (TestHubStopsIdleSessionOnReturn).
func TestChannelRefusalsAreJSON(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, 60*time.Second)
	s := startStack(t, ctx)
	ended, endedPasses, err := s.c.St.Sess.Start(ctx, "idle")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.c.St.Sess.Stop(ctx, ended.ID, "operator"); err != nil {
		t.Fatal(err)
	}
	_, passes, err := s.c.St.Sess.Start(ctx, "idle")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		bearers []string
		want    wire.Failure
	}{
		{"no credential", nil, wire.FailChannelUnauthenticated},
		{"garbage", []string{"not-a-pass"}, wire.FailChannelUnauthenticated},
		{"a member's token", []string{s.token}, wire.FailChannelUnauthenticated},
		{"a broker pass", []string{passes.Broker}, wire.FailChannelForbidden},
		{"a stopped session's pass, revoked with it", []string{endedPasses.Worker}, wire.FailChannelUnauthenticated},
		{"a worker pass without a handshake", []string{passes.Worker}, wire.FailChannelUpgradeRequired},
		{"two credentials", []string{passes.Worker, passes.Worker}, wire.FailTwoCredentials},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := stacktest.Ambiguous{Method: http.MethodGet, Path: wire.ChannelPath, Bearers: tt.bearers}.Send(ctx, t, s.base)
			row := tt.want.Row()
			body := `{"error":{"code":"` + row.Code + `","message":"` + row.Message + `"}}`
			if a.Status != row.Status || string(a.Body) != body {
				t.Fatalf("%d %s, want %d %s", a.Status, a.Body, row.Status, body)
			}
			if ct, cc := a.Header.Get("Content-Type"), a.Header.Get("Cache-Control"); ct != "application/json; charset=utf-8" || cc != "no-store" {
				t.Errorf("Content-Type %q, Cache-Control %q", ct, cc)
			}
		})
	}
}
