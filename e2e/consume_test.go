package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/stacktest"
	"github.com/agentfy/agentfy/view"
)

func TestConsumeRoute(t *testing.T) {
	c := client.Context(t)
	agent, other := client.NewAgent(t, ""), client.NewAgent(t, "")
	sess, passes, err := st.Sess.Start(c, agent)
	if err != nil {
		t.Fatal(err)
	}
	_, otherPasses, err := st.Sess.Start(c, other)
	if err != nil {
		t.Fatal(err)
	}
	orgKey, _, _ := st.Creds.CreateOrgKey(c, "org-acme", "production", []string{auth.ScopeWorkerLogsRead})
	caps := view.NewCapabilities(st.Replicas[0].Redis, "dev", st.CapabilityKeys, 0)
	newCap := func() string {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		id := hex.EncodeToString(b)
		if err := caps.Put(c, id, sess.ID, "04"+strings.Repeat("ab", 64)); err != nil {
			t.Fatal(err)
		}
		return id
	}
	body := stacktest.ConsumeRequest
	id := newCap()

	tests := []struct {
		name, bearer, body string
		want               int
	}{
		{"no credential", "", body(id), http.StatusUnauthorized},
		{"garbage", "not-a-pass", body(id), http.StatusUnauthorized},
		{"forged pass", "afp_0123456789abcdef_" + strings.Repeat("cd", 32), body(id), http.StatusUnauthorized},
		{"worker pass", passes.Worker, body(id), http.StatusForbidden},
		{"human JWT", client.Token(t, "u-alice"), body(id), http.StatusForbidden},
		{"organisation key", orgKey, body(id), http.StatusForbidden},
		{"another session's broker pass", otherPasses.Broker, body(id), http.StatusNotFound},
		{"malformed body", passes.Broker, `{"requestId":`, http.StatusBadRequest},
		{"unknown field", passes.Broker, `{"requestId":"` + id + `","publicKey":"04"}`, http.StatusBadRequest},
		{"oversized body", passes.Broker, `{"requestId":"` + strings.Repeat("a", 2000) + `"}`, http.StatusBadRequest},
		{"forged request id", passes.Broker, body(strings.Repeat("0", 64)), http.StatusNotFound},
		{"malformed request id", passes.Broker, body("xyz"), http.StatusNotFound},
	}
	var notFound []string
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := client.Consume(t, tt.bearer, tt.body)
			if r.Status != tt.want {
				t.Fatalf("status %d, want %d: %s", r.Status, tt.want, r.Body)
			}
			if r.Status == http.StatusNotFound {
				notFound = append(notFound, r.Body)
			}
		})
	}
	// None of the refusals destroyed the capability: the right broker redeems it once.
	r := client.Consume(t, passes.Broker, body(id))
	var ok struct{ PublicKey string }
	if r.Status != http.StatusOK || json.Unmarshal([]byte(r.Body), &ok) != nil || ok.PublicKey != "04"+strings.Repeat("ab", 64) {
		t.Fatalf("legitimate consume: %d %s", r.Status, r.Body)
	}
	r = client.Consume(t, passes.Broker, body(id))
	if r.Status != http.StatusNotFound {
		t.Fatalf("replay: %d %s", r.Status, r.Body)
	}
	notFound = append(notFound, r.Body)
	for _, nb := range notFound {
		if nb != notFound[0] {
			t.Fatalf("404 bodies differ (an oracle): %q vs %q", nb, notFound[0])
		}
	}
	// A stopped session's broker pass is revoked.
	id2 := newCap()
	if _, err := st.Sess.Stop(c, sess.ID, "operator"); err != nil {
		t.Fatal(err)
	}
	if r := client.Consume(t, passes.Broker, body(id2)); r.Status != http.StatusUnauthorized {
		t.Fatalf("stopped session's broker pass: %d %s", r.Status, r.Body)
	}
}

func TestStatusFeedAccess(t *testing.T) {
	for name, tc := range map[string]struct {
		agent, bearer string
		want          int
	}{
		"no token":      {"agent-scout", "", http.StatusUnauthorized},
		"foreign agent": {"agent-nova", client.Token(t, "u-alice"), http.StatusNotFound},
		"unknown agent": {"agent-nobody", client.Token(t, "u-alice"), http.StatusNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(client.Context(t), http.MethodGet, replicaA()+stacktest.StatusPath(tc.agent), nil)
			if tc.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+tc.bearer)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != tc.want || resp.Header.Get("Cache-Control") != "no-store" {
				t.Fatalf("%d (Cache-Control %q), want %d", resp.StatusCode, resp.Header.Get("Cache-Control"), tc.want)
			}
		})
	}
}
