package auth_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/keyspace"
)

// TestClaimOrgKeyMatchesVerifyOrgKey reads each key's record as a view's re-check does
// (view/check.go: HGETALL of the claimed key's record, then OrgKeyClaim.Verify) and
// wants VerifyOrgKey's answer.
func TestClaimOrgKeyMatchesVerifyOrgKey(t *testing.T) {
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	ctx := testenv.Context(t, 30*time.Second)
	dep := testenv.Deployment(t)
	st := auth.NewStore(rdb, dep, nil)

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

	keys := keyspace.For(dep)
	claimed := func(tok string) (auth.OrgKey, error) {
		t.Helper()
		claim, ok := auth.ClaimOrgKey(tok)
		if !ok {
			t.Fatalf("ClaimOrgKey refused a well-formed token")
		}
		record, err := rdb.HGetAll(ctx, keys.OrgKey(claim.ID())).Result()
		if err != nil {
			t.Fatal(err)
		}
		return claim.Verify(record)
	}
	same := func(name, tok string) (auth.OrgKey, error) {
		t.Helper()
		got, gotErr := claimed(tok)
		want, wantErr := st.VerifyOrgKey(ctx, tok)
		if (gotErr == nil) != (wantErr == nil) || errors.Is(gotErr, auth.ErrUnauthenticated) != errors.Is(wantErr, auth.ErrUnauthenticated) {
			t.Fatalf("%s: the claim's err = %v, VerifyOrgKey err = %v", name, gotErr, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the claim = %+v, VerifyOrgKey = %+v", name, got, want)
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
		if claim, ok := auth.ClaimOrgKey(tok); ok || claim.ID() != "" {
			t.Errorf("%s: ClaimOrgKey = %q, %v; want nothing claimed", name, claim.ID(), ok)
		}
		if _, err := st.VerifyOrgKey(ctx, tok); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("%s: VerifyOrgKey = %v", name, err)
		}
	}

	// A record of the claimed id without the secret's hash, and the zero claim, verify
	// nothing.
	claim, _ := auth.ClaimOrgKey(other)
	for name, tt := range map[string]struct {
		claim  auth.OrgKeyClaim
		record map[string]string
	}{
		"no hash":                             {claim, map[string]string{"org": "org-other", "env": "staging"}},
		"another hash":                        {claim, map[string]string{"org": "org-other", "env": "staging", "hash": strings.Repeat("0", 64)}},
		"no record":                           {claim, map[string]string{}},
		"zero claim":                          {auth.OrgKeyClaim{}, map[string]string{"org": "org-other", "env": "staging"}},
		"zero claim, the empty secret's hash": {auth.OrgKeyClaim{}, map[string]string{"org": "org-other", "hash": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}},
	} {
		if got, err := tt.claim.Verify(tt.record); !errors.Is(err, auth.ErrUnauthenticated) || !reflect.DeepEqual(got, auth.OrgKey{}) {
			t.Errorf("%s: Verify = %+v, %v; want ErrUnauthenticated", name, got, err)
		}
	}
}
