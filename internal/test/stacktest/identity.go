package stacktest

import (
	"context"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/wire"
)

// ProviderJWKS is how a stack's replicas fetch the keys of a test's identity provider:
// every period, and stale after the shortest bound (auth.MinJWKSMaxStale), so that a
// test sees a failed refresh and the end of staleness within seconds (production:
// 30 s–1 h and 24 h).
func ProviderJWKS(period time.Duration) auth.JWKSOptions {
	return auth.JWKSOptions{MinRefresh: period, MaxRefresh: period, DefaultRefresh: period, MaxStale: auth.MinJWKSMaxStale}
}

// SignJWT signs claims with key by method, naming kid in the header unless it is
// empty: a token of a test's identity provider, or of one it never had.
func SignJWT(tb testing.TB, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	tb.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// LiveSession starts a session of agent on st (StartSession: skipped under -short) and
// opens the demo site's page path in its browser, so that its views have a frame.
func LiveSession(ctx context.Context, tb testing.TB, st *stack.Stack, agent string, o stack.SessionOptions, path string) *stack.Session {
	tb.Helper()
	ss := StartSession(ctx, tb, st, agent, o)
	if _, err := ss.Tool(ctx, wire.ToolOpen, map[string]string{"url": st.Site + path}); err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	return ss
}
