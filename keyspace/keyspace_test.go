package keyspace_test

import (
	"path"
	"strings"
	"testing"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/keyspace"
)

// hashTag is the part of a key Redis Cluster hashes: the first {…} with something in it.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

func TestKeys(t *testing.T) {
	ns, err := bus.NewNamespace("prod-eu", 3)
	if err != nil {
		t.Fatal(err)
	}
	k := ns.Keys()
	tests := []struct{ got, want string }{
		{k.Agent("a1"), "agentfy:prod-eu:agent:{a:a1}"},
		{k.CurrentSession("a1"), "agentfy:prod-eu:agent:{a:a1}:session"},
		{k.User("u1"), "agentfy:prod-eu:user:{u:u1}"},
		{k.UserTeams("u1"), "agentfy:prod-eu:user:{u:u1}:teams"},
		{k.Org("o1"), "agentfy:prod-eu:org:{o:o1}"},
		{k.Team("t1"), "agentfy:prod-eu:team:{t:t1}"},
		{k.TeamMembers("t1"), "agentfy:prod-eu:team:{t:t1}:members"},
		{k.TeamAgents("t1"), "agentfy:prod-eu:team:{t:t1}:agents"},
		{k.OrgKey("k1"), "agentfy:prod-eu:orgkey:{k:k1}"},
		{k.OrgKeys("o1"), "agentfy:prod-eu:org:{o:o1}:keys"},
		{k.AdminKey("m1"), "agentfy:prod-eu:adminkey:{m:m1}"},
		{k.DirectoryGeneration(), "agentfy:prod-eu:directory:generation"},
		{k.Pass("p1"), "agentfy:prod-eu:pass:{p:p1}"},
		{k.Session("s1"), "agentfy:prod-eu:session:{s:s1}"},
		{k.SessionActivity("s1"), "agentfy:prod-eu:session:{s:s1}:activity"},
		{k.Grant("p1", "ab"), "agentfy:prod-eu:cap:{p:p1}:ab"},
		{k.Gate("a1"), "agentfy:prod-eu:gate:{a:a1}"},
		{k.PacePattern("a1"), "agentfy:prod-eu:pace:{a:a1}:*"},
		{k.Pattern(), "agentfy:prod-eu:*"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("key %q, want %q", tt.got, tt.want)
		}
	}
	if keyspace.For("prod-eu") != k {
		t.Error("For and Namespace.Keys differ")
	}
}

// The keys a script or transaction touches together share a slot, and the ACL pattern
// covers every key.
func TestKeysShareSlots(t *testing.T) {
	k := keyspace.For("dev")
	pace := k.Pace("a1", "user:alice")
	groups := [][]string{
		{k.Agent("a1"), k.CurrentSession("a1"), k.Gate("a1"), pace},
		{k.Session("s1"), k.SessionActivity("s1")},
		{k.Pass("p1"), k.Grant("p1", strings.Repeat("ab", 32))},
		{k.Team("t1"), k.TeamMembers("t1"), k.TeamAgents("t1")},
		{k.User("u1"), k.UserTeams("u1")},
		{k.Org("o1"), k.OrgKeys("o1")},
	}
	for _, g := range groups {
		for _, key := range g {
			if hashTag(key) != hashTag(g[0]) {
				t.Errorf("%s and %s are in different slots", key, g[0])
			}
			if ok, _ := path.Match(k.Pattern(), key); !ok {
				t.Errorf("%s is outside the ACL pattern %s", key, k.Pattern())
			}
		}
	}
	if ok, _ := path.Match(k.PacePattern("a1"), pace); !ok {
		t.Errorf("pace %s does not match %s", pace, k.PacePattern("a1"))
	}
	if strings.Contains(pace, "alice") || pace == k.Pace("a1", "user:bob") {
		t.Errorf("pace %s: the caller must appear only as a distinct hash", pace)
	}
}

// TestOperatorPatterns: the operator's Redis user reaches every key of the directory,
// the credentials and the sessions, and no key of a view (grant, gate, pace).
func TestOperatorPatterns(t *testing.T) {
	k := keyspace.For("prod-eu")
	matches := func(key string) bool {
		for _, p := range k.OperatorPatterns() {
			if ok, err := path.Match(p, key); err != nil {
				t.Fatal(err)
			} else if ok {
				return true
			}
		}
		return false
	}
	for _, key := range []string{
		k.Agent("a"), k.User("u"), k.UserTeams("u"), k.Org("o"), k.Team("t"), k.TeamMembers("t"),
		k.TeamAgents("t"), k.DirectoryGeneration(), k.OrgKey("i"), k.OrgKeys("o"), k.AdminKey("m"),
		k.Pass("p"), k.Session("s"), k.SessionActivity("s"), k.CurrentSession("a"),
	} {
		if !matches(key) {
			t.Errorf("the operator cannot reach %s", key)
		}
	}
	for _, key := range []string{k.Grant("p", strings.Repeat("ab", 32)), k.Gate("a"), k.Pace("a", "u"), k.PacePattern("a")} {
		if matches(key) {
			t.Errorf("the operator reaches %s", key)
		}
	}
	if matches(keyspace.For("other").Agent("a")) {
		t.Error("the operator reaches another deployment's agent")
	}
}
