package admin_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// TestAdminRefusesAmbiguousRequests: on the admin listener, two Authorization headers
// and an encoded slash in the path are 400, before the credential or the route is
// looked at, and change nothing (issue 35 item 6). The encoded slashes below decode to
// real routes — t1%2Fmembers/u2 to "add u2 to t1", which it did.
func TestAdminRefusesAmbiguousRequests(t *testing.T) {
	ctx := testenv.Context(t, 60*time.Second)
	e := startAdmin(t, ctx)
	member, err := auth.MintHS256(jwtSecret, jwtIssuer, jwtAudience, "u1", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	const js = "application/json"
	tests := []stacktest.Ambiguous{
		{Name: "the admin key twice", Method: "PUT", Path: "/v1/admin/users/u9", Bearers: []string{e.key, e.key}, ContentType: js, Body: `{"name":"N"}`},
		{Name: "the admin key then a JWT", Method: "PUT", Path: "/v1/admin/teams/t1/members/u2", Bearers: []string{e.key, member}},
		{Name: "a JWT then the admin key", Method: "DELETE", Path: "/v1/admin/agents/a1", Bearers: []string{member, e.key}},
		{Name: "two headers on a read", Method: "GET", Path: "/v1/admin/teams/t1/members", Bearers: []string{e.key, "nope"}},
		{Name: "encoded slash into a member's route", Method: "PUT", Path: "/v1/admin/teams/t1%2Fmembers/u2", Bearers: []string{e.key}},
		{Name: "lower-case encoded slash", Method: "PUT", Path: "/v1/admin/teams/t1%2fmembers/u2", Bearers: []string{e.key}},
		{Name: "encoded slash into the member list", Method: "PUT", Path: "/v1/admin/teams/t1%2Fmembers", Bearers: []string{e.key}, ContentType: js, Body: `{"members":["u2"]}`},
		{Name: "encoded slash on a read", Method: "GET", Path: "/v1/admin/orgs/o1%2Fkeys", Bearers: []string{e.key}},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			before := e.snapshot(t, ctx)
			a := tt.Send(ctx, t, e.url)
			// A path with an id holding '/' is none of the document's: only the answer's
			// shape is checked then.
			doc := e.oas
			if strings.Contains(strings.ToLower(tt.Path), "%2f") {
				doc = nil
			}
			stacktest.WantRefused(ctx, t, doc, tt, a)
			if after := e.snapshot(t, ctx); !maps.Equal(before, after) {
				t.Errorf("a refused request changed Redis:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
	if ok, err := e.dir.IsMember(ctx, "t1", "u2"); err != nil || ok {
		t.Fatalf("u2 a member of t1 after the refusals: %v %v", ok, err)
	}
}
