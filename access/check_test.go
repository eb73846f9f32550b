package access

import (
	"errors"
	"testing"
	"time"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/directory"
)

// errRedis stands for a read that could not be made.
var errRedis = errors.New("redis: connection refused")

// The checks are rules over values: these cases read nothing themselves (the stores
// have no Redis client here), so what they name to read and what they answer is the
// rules' alone. The same rules against real Redis: api's access tests and reliability's
// access rows.

func TestPartnerCheck(t *testing.T) {
	reader := auth.OrgKey{ID: "k1", OrgID: "acme", Environment: "production", Scopes: []string{auth.ScopeWorkerLogsRead}}
	agent := directory.Agent{ID: "agent-a", TeamID: "t1", OrgID: "acme", Environment: "production"}
	tests := []struct {
		name      string
		recheck   bool
		facts     Facts
		wantReads Reads
		wantErr   error
	}{
		{"first trusts the route's key", false, Facts{Agent: agent}, Reads{Agent: true}, nil},
		{"first, unknown agent", false, Facts{AgentErr: directory.ErrNotFound}, Reads{Agent: true}, auth.ErrNotFound},
		{"first, agent unread", false, Facts{AgentErr: errRedis}, Reads{Agent: true}, errRedis},
		{"first, agent of another environment", false, Facts{Agent: directory.Agent{OrgID: "acme", Environment: "staging"}}, Reads{Agent: true}, auth.ErrNotFound},
		{"re-check verifies the key again", true, Facts{Agent: agent, Key: reader}, Reads{Agent: true, Token: "tok"}, nil},
		{"re-check, key revoked meanwhile", true, Facts{Agent: agent, KeyErr: auth.ErrUnauthenticated}, Reads{Agent: true, Token: "tok"}, auth.ErrNotFound},
		{"re-check, key unread", true, Facts{Agent: agent, KeyErr: errRedis}, Reads{Agent: true, Token: "tok"}, errRedis},
		{"re-check judges the key read, not the route's", true, Facts{Agent: agent, Key: auth.OrgKey{OrgID: "acme", Environment: "production"}}, Reads{Agent: true, Token: "tok"}, auth.ErrForbidden},
		{"re-check, agent deleted meanwhile", true, Facts{Key: reader, AgentErr: directory.ErrNotFound}, Reads{Agent: true, Token: "tok"}, auth.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Partner("tok", reader, "acme", "agent-a", auth.ScopeWorkerLogsRead)
			reads, err := c.Reads(tt.recheck)
			if err != nil || reads != tt.wantReads {
				t.Fatalf("Reads = %+v, %v; want %+v", reads, err, tt.wantReads)
			}
			if err := c.Decide(t.Context(), tt.facts); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Decide = %v, want %v", err, tt.wantErr)
			}
		})
	}
	// An agent id no record can have is answered without a read.
	if _, err := Partner("tok", reader, "acme", "bad id!", auth.ScopeWorkerLogsRead).Reads(false); !errors.Is(err, auth.ErrNotFound) {
		t.Fatalf("invalid agent id: %v", err)
	}
}

func TestMemberCheck(t *testing.T) {
	newRules := func() *Rules { return New(directory.NewStore(nil, "test")) }
	inT1 := directory.Agent{ID: "agent-a", TeamID: "t1"}
	// Checks that saw the agent in t1 read t1's member set beside the record.
	tests := []struct {
		name           string
		facts          Facts
		wantErr        error
		wantRemembered bool
	}{
		{"member", Facts{Agent: inT1, Member: true}, nil, false},
		{"not a member", Facts{Agent: inT1}, auth.ErrNotFound, true},
		{"unknown agent", Facts{AgentErr: directory.ErrNotFound}, auth.ErrNotFound, true},
		{"agent unread", Facts{AgentErr: errRedis}, errRedis, false},
		{"membership unread", Facts{Agent: inT1, MemberErr: errRedis}, errRedis, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRules()
			m := &member{rules: r, key: refusal{"agent-a", "u1"}, team: "t1"}
			reads, err := m.Reads(true)
			if want := (Reads{Agent: true, Team: "t1", User: "u1"}); err != nil || reads != want {
				t.Fatalf("Reads = %+v, %v; want %+v", reads, err, want)
			}
			if err := m.Decide(t.Context(), tt.facts); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Decide = %v, want %v", err, tt.wantErr)
			}
			if _, ok := r.refused.get(m.key, time.Now()); ok != tt.wantRemembered {
				t.Fatalf("refusal remembered: %v, want %v", ok, tt.wantRemembered)
			}
		})
	}

	t.Run("remembered refusal reads the generation alone", func(t *testing.T) {
		r := newRules()
		r.refused.add(refusal{"agent-a", "u1"}, refused{generation: 7, known: true}, time.Now())
		c := r.Member("u1", "agent-a")
		if reads, err := c.Reads(false); err != nil || reads != (Reads{Generation: true}) {
			t.Fatalf("first check after a refusal reads %+v, %v; want the generation alone", reads, err)
		}
		if err := c.Decide(t.Context(), Facts{Generation: 7}); !errors.Is(err, auth.ErrNotFound) {
			t.Fatalf("same generation: %v, want ErrNotFound", err)
		}
		if _, err := c.Reads(false); err != nil {
			t.Fatal(err)
		}
		if err := c.Decide(t.Context(), Facts{GenerationErr: errRedis}); !errors.Is(err, errRedis) {
			t.Fatalf("generation unread: %v, want the read's error", err)
		}
		// The re-check reads the truth whatever is remembered.
		if reads, err := c.Reads(true); err != nil || !reads.Agent || reads.Generation {
			t.Fatalf("re-check reads %+v, %v; want the agent's record", reads, err)
		}
	})

	t.Run("invalid agent id", func(t *testing.T) {
		r := newRules()
		c := r.Member("u1", "bad id!")
		if _, err := c.Reads(false); !errors.Is(err, auth.ErrNotFound) {
			t.Fatalf("invalid agent id: %v, want ErrNotFound without a read", err)
		}
		// The refusal is remembered like any other: the next first check reads the
		// generation.
		if reads, err := r.Member("u1", "bad id!").Reads(false); err != nil || reads != (Reads{Generation: true}) {
			t.Fatalf("after the refusal: %+v, %v", reads, err)
		}
	})
}
