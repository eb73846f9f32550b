package auth_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

func TestOrgKeys(t *testing.T) {
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	ctx := testenv.Context(t, 30*time.Second)
	st := auth.NewStore(rdb, testenv.Deployment(t), nil)

	token, key, err := st.CreateOrgKey(ctx, "org-acme", "production", []string{auth.ScopeWorkerLogsRead})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.VerifyOrgKey(ctx, token)
	if err != nil || got.ID != key.ID || got.OrgID != "org-acme" || got.Environment != "production" || !got.HasScope(auth.ScopeWorkerLogsRead) {
		t.Fatalf("VerifyOrgKey = %+v, %v", got, err)
	}
	// The secret part of the token is nowhere in Redis.
	secretPart := token[strings.LastIndex(token, "_")+1:]
	assertNotInRedis(t, st, srv, secretPart)

	flipped := token[:len(token)-1] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", token[len(token)-1])+1)%16])
	for name, tok := range map[string]string{
		"altered secret": flipped,
		"empty":          "",
		"wrong prefix":   "afp" + token[3:],
		"uppercase":      strings.ToUpper(token),
		"truncated":      token[:len(token)-2],
	} {
		if _, err := st.VerifyOrgKey(ctx, tok); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("%s: err = %v, want ErrUnauthenticated", name, err)
		}
	}
	if _, err := st.RevokeOrgKey(ctx, key.OrgID, key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.VerifyOrgKey(ctx, token); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("revoked key: err = %v", err)
	}
}

func TestPassRolesNeverInterchange(t *testing.T) {
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	ctx := testenv.Context(t, 30*time.Second)
	st := auth.NewStore(rdb, testenv.Deployment(t), nil)

	workerTok, wp, err := st.IssuePass(ctx, auth.RoleWorker, "s1", "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	brokerTok, bp, err := st.IssuePass(ctx, auth.RoleBroker, "s1", "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	orgTok, _, err := st.CreateOrgKey(ctx, "org-acme", "production", []string{auth.ScopeWorkerLogsRead})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		token   string
		role    auth.Role
		wantErr error
	}{
		{"worker pass as worker", workerTok, auth.RoleWorker, nil},
		{"broker pass as broker", brokerTok, auth.RoleBroker, nil},
		{"worker pass as broker", workerTok, auth.RoleBroker, auth.ErrForbidden},
		{"broker pass as worker", brokerTok, auth.RoleWorker, auth.ErrForbidden},
		{"org key as broker", orgTok, auth.RoleBroker, auth.ErrUnauthenticated},
		{"garbage as broker", "afp_nothing", auth.RoleBroker, auth.ErrUnauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := st.VerifyPass(ctx, tt.token, tt.role)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && (p.SessionID != "s1" || p.AgentID != "agent-1" || p.Role != tt.role) {
				t.Fatalf("pass = %+v", p)
			}
		})
	}
	assertNotInRedis(t, st, srv, workerTok[strings.LastIndex(workerTok, "_")+1:])
	assertNotInRedis(t, st, srv, brokerTok[strings.LastIndex(brokerTok, "_")+1:])

	if err := st.RevokePasses(ctx, wp.ID, bp.ID); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{workerTok, brokerTok} {
		if _, err := st.VerifyPass(ctx, tok, auth.RoleBroker); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatalf("revoked pass: err = %v", err)
		}
	}
}
