package auth_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

func TestQueueVerifyOrgKeyMatchesVerifyOrgKey(t *testing.T) {
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	ctx := testenv.Context(t, 30*time.Second)
	st := auth.NewStore(rdb, testenv.Deployment(t), nil)

	token, key, err := st.CreateOrgKey(ctx, "org-acme", "production", []string{auth.ScopeWorkerLogsRead, "other:scope"})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := st.CreateOrgKey(ctx, "org-other", "staging", nil)
	if err != nil {
		t.Fatal(err)
	}
	workerPass, _, err := st.IssuePass(ctx, auth.RoleWorker, "s1", "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	// The right id with another valid-looking secret.
	last := strings.LastIndex(token, "_")
	wrongSecret := token[:last+1] + strings.Repeat("0", len(token)-last-1)
	if wrongSecret == token {
		t.Fatal("test token is all zeros")
	}

	queued := func(tok string) (auth.OrgKey, error) {
		t.Helper()
		p := rdb.Pipeline()
		f := st.QueueVerifyOrgKey(ctx, p, tok)
		if n := p.Len(); n != 1 {
			t.Fatalf("QueueVerifyOrgKey queued %d commands for a well-formed token; want 1", n)
		}
		_, _ = p.Exec(ctx)
		return f()
	}
	same := func(name, tok string) (auth.OrgKey, error) {
		t.Helper()
		got, gotErr := queued(tok)
		want, wantErr := st.VerifyOrgKey(ctx, tok)
		if (gotErr == nil) != (wantErr == nil) || errors.Is(gotErr, auth.ErrUnauthenticated) != errors.Is(wantErr, auth.ErrUnauthenticated) {
			t.Fatalf("%s: QueueVerifyOrgKey err = %v, VerifyOrgKey err = %v", name, gotErr, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: QueueVerifyOrgKey = %+v, VerifyOrgKey = %+v", name, got, want)
		}
		return got, gotErr
	}

	got, err := same("valid key", token)
	if err != nil || got.ID != key.ID || got.OrgID != "org-acme" || got.Environment != "production" ||
		!got.HasScope(auth.ScopeWorkerLogsRead) || !got.HasScope("other:scope") {
		t.Fatalf("valid key: %+v, %v", got, err)
	}
	if got, err := same("second key", other); err != nil || got.OrgID != "org-other" || got.Environment != "staging" || len(got.Scopes) != 0 {
		t.Fatalf("second key: %+v, %v", got, err)
	}
	if _, err := same("wrong secret", wrongSecret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("wrong secret: %v", err)
	}
	if _, err := st.RevokeOrgKey(ctx, key.OrgID, key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := same("revoked key", token); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("revoked key: %v", err)
	}
	// Revoking one key leaves the other.
	if _, err := same("other key after a revocation", other); err != nil {
		t.Fatalf("other key after a revocation: %v", err)
	}

	for name, tok := range map[string]string{
		"empty":       "",
		"garbage":     "garbage",
		"worker pass": workerPass,
		"uppercase":   strings.ToUpper(other),
		"truncated":   other[:len(other)-2],
	} {
		p := rdb.Pipeline()
		f := st.QueueVerifyOrgKey(ctx, p, tok)
		if n := p.Len(); n != 0 {
			t.Errorf("%s: queued %d commands for a malformed token", name, n)
		}
		if got, err := f(); !errors.Is(err, auth.ErrUnauthenticated) || !reflect.DeepEqual(got, auth.OrgKey{}) {
			t.Errorf("%s: QueueVerifyOrgKey = %+v, %v; want ErrUnauthenticated", name, got, err)
		}
		if _, err := st.VerifyOrgKey(ctx, tok); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("%s: VerifyOrgKey = %v", name, err)
		}
	}
}

func TestQueueVerifyOrgKeyReadsAtExec(t *testing.T) {
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	ctx := testenv.Context(t, 30*time.Second)
	st := auth.NewStore(rdb, testenv.Deployment(t), nil)
	token, key, err := st.CreateOrgKey(ctx, "org-acme", "production", []string{auth.ScopeWorkerLogsRead})
	if err != nil {
		t.Fatal(err)
	}
	// Queued while the key was valid, run after it was revoked: the revocation counts.
	p := rdb.Pipeline()
	f := st.QueueVerifyOrgKey(ctx, p, token)
	if _, err := st.RevokeOrgKey(ctx, key.OrgID, key.ID); err != nil {
		t.Fatal(err)
	}
	_, _ = p.Exec(ctx)
	if got, err := f(); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("key revoked between queue and Exec: %+v, %v", got, err)
	}
}

func TestQueueVerifyOrgKeyRedisError(t *testing.T) {
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	ctx := testenv.Context(t, 30*time.Second)
	st := auth.NewStore(rdb, testenv.Deployment(t), nil)
	token, _, err := st.CreateOrgKey(ctx, "org-acme", "production", []string{auth.ScopeWorkerLogsRead})
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	p := rdb.Pipeline()
	f := st.QueueVerifyOrgKey(ctx, p, token)
	if _, err := p.Exec(cancelled); err == nil {
		t.Fatal("Exec with a cancelled context succeeded")
	}
	// Not knowing is neither a key nor a refusal.
	if got, err := f(); err == nil || errors.Is(err, auth.ErrUnauthenticated) || !errors.Is(err, context.Canceled) {
		t.Fatalf("QueueVerifyOrgKey after a failed Exec = %+v, %v; want a wrapped context.Canceled", got, err)
	}
	if _, err := st.VerifyOrgKey(cancelled, token); err == nil || errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("VerifyOrgKey with a cancelled context = %v", err)
	}
}
