package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/api/admin"
	"github.com/agentfy/agentfy/api/answer"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/test/oas"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/keyspace"
	"github.com/agentfy/agentfy/openapi"
)

// The failure table's rows that name this package's values say them as they are: the
// admin API's body bound.
func TestFailureRowsSayThisPackagesValues(t *testing.T) {
	if want := fmt.Sprintf("the body is larger than %d bytes", admin.MaxBody); answer.AdminTooLarge.Message != want {
		t.Errorf("too_large says %q, want %q", answer.AdminTooLarge.Message, want)
	}
}

// adminEnv is an admin listener on a real redis-server, with an admin key and a
// directory of two teams, two users, two organisations and one agent (startAdmin).
type adminEnv struct {
	rdb   redis.UniversalClient
	dep   string
	url   string
	key   string // an admin key
	creds *auth.Store
	dir   *directory.Store
	oas   *oas.Validator
	logs  *bytes.Buffer
}

// The members' tokens the admin listener's verifier takes (MintHS256).
const (
	jwtIssuer   = "agentfy-test"
	jwtAudience = "agentfy-api"
)

var jwtSecret = []byte("0123456789abcdef0123456789abcdef")

func startAdmin(t *testing.T, ctx context.Context) *adminEnv {
	t.Helper()
	rs := testenv.Redis(t)
	rdb := testenv.RedisClient(t, rs, 0)
	dep := testenv.Deployment(t)
	e := &adminEnv{rdb: rdb, dep: dep, creds: auth.NewStore(rdb, dep, nil), dir: directory.NewStore(rdb, dep), logs: &bytes.Buffer{}}
	err := e.dir.Load(ctx, directory.Seed{
		Teams: []directory.Team{{ID: "t1", Name: "Team"}, {ID: "t2", Name: "Other team"}},
		Users: []directory.User{{ID: "u1", Name: "User", Teams: []string{"t1"}}, {ID: "u2", Name: "Other", Teams: []string{"t2"}}},
		Orgs:  []directory.Org{{ID: "o1", Name: "Org", Environments: []string{"prod", "staging"}}, {ID: "o2", Name: "Other org", Environments: []string{"prod"}}},
		Agents: []directory.Agent{
			{ID: "a1", Name: "Agent", TeamID: "t1", OrgID: "o1", Environment: "prod"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if e.key, _, err = e.creds.CreateAdminKey(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if e.oas, err = oas.NewAdmin(ctx); err != nil {
		t.Fatal(err)
	}
	jwt, err := auth.NewVerifier(ctx, testenv.Logger(t), auth.JWTConfig{Issuer: jwtIssuer, Audience: jwtAudience, HS256Secret: jwtSecret})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(jwt.Close)
	srv := httptest.NewServer(admin.New(admin.Config{
		Log: testenv.Logger(t).Output(e.logs), Creds: e.creds, Dir: e.dir, JWT: jwt, OpenAPI: openapi.AdminDocument,
	}).Handler())
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// call sends an admin request and checks the answer against the admin API's document
// and the no-store rule.
func (e *adminEnv) call(t *testing.T, ctx context.Context, method, path, bearer, contentType, body string) (int, string) {
	t.Helper()
	var rd *strings.Reader
	if body != "" {
		rd = strings.NewReader(body)
	} else {
		rd = strings.NewReader("")
	}
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("%s %s: Cache-Control %q, want no-store", method, path, resp.Header.Get("Cache-Control"))
	}
	vreq, _ := http.NewRequestWithContext(ctx, method, e.url+path, nil)
	if err := e.oas.Validate(ctx, vreq, resp.StatusCode, resp.Header, b.Bytes()); err != nil && !e.undocumented(method, path) {
		t.Errorf("%v\nbody: %.300s", err, b.String())
	}
	return resp.StatusCode, b.String()
}

// undocumented names the requests the tests send to routes the document has not (an
// unknown route, a method a route does not take): only their error body is checked.
func (e *adminEnv) undocumented(method, path string) bool {
	return path == "/v1/admin/agents" || !strings.HasPrefix(path, "/v1/admin/") || (method == "POST" && strings.HasPrefix(path, "/v1/admin/agents/"))
}

// snapshot reads every key of the deployment with its value, to prove that a refused
// change changed nothing.
func (e *adminEnv) snapshot(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	out := map[string]string{}
	iter := e.rdb.Scan(ctx, 0, keyspace.For(e.dep).Pattern(), 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		var v any
		var err error
		switch e.rdb.Type(ctx, k).Val() {
		case "hash":
			v, err = e.rdb.HGetAll(ctx, k).Result()
		case "set":
			var m []string
			m, err = e.rdb.SMembers(ctx, k).Result()
			slices.Sort(m)
			v = m
		case "string":
			v, err = e.rdb.Get(ctx, k).Result()
		default:
			v = "?"
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(v)
		out[k] = string(b)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAdminRefusals: every refused admin request is a 4xx whose body names what is
// wrong, answers within the request's deadline, and changes nothing in Redis.
func TestAdminRefusals(t *testing.T) {
	ctx := testenv.Context(t, 60*time.Second)
	e := startAdmin(t, ctx)
	orgKey, _, err := e.creds.CreateOrgKey(ctx, "o1", "prod", []string{auth.ScopeWorkerLogsRead})
	if err != nil {
		t.Fatal(err)
	}
	pass, _, err := e.creds.IssuePass(ctx, auth.RoleWorker, "s1", "a1")
	if err != nil {
		t.Fatal(err)
	}
	jwt, err := auth.MintHS256(jwtSecret, jwtIssuer, jwtAudience, "u1", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	strangerJWT, err := auth.MintHS256([]byte("another secret, another issuer's"), jwtIssuer, jwtAudience, "u1", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	brokerPass, _, err := e.creds.IssuePass(ctx, auth.RoleBroker, "s1", "a1")
	if err != nil {
		t.Fatal(err)
	}
	revokedOrgKey, revokedOrg, err := e.creds.CreateOrgKey(ctx, "o1", "prod", []string{auth.ScopeWorkerLogsRead})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := e.creds.RevokeOrgKey(ctx, "o1", revokedOrg.ID); err != nil || !ok {
		t.Fatalf("revoke org key: %v %v", ok, err)
	}
	revokedToken, revoked, err := e.creds.CreateAdminKey(ctx, "revoked")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := e.creds.RevokeAdminKey(ctx, revoked.ID); err != nil || !ok {
		t.Fatalf("revoke admin key: %v %v", ok, err)
	}
	// wrongSecret is token with the last digit of its secret changed.
	wrongSecret := func(token string) string {
		last := byte('0')
		if token[len(token)-1] == '0' {
			last = '1'
		}
		return token[:len(token)-1] + string(last)
	}
	const js = "application/json"
	huge := `{"members":["` + strings.Repeat("u", admin.MaxBody) + `"]}`
	tests := []struct {
		name, method, path, bearer, contentType, body string
		want                                          int
		wantInMessage                                 string
	}{
		{"no credential", "PUT", "/v1/admin/users/u9", "", js, `{"name":"N"}`, 401, ""},
		{"garbage credential", "PUT", "/v1/admin/users/u9", "nope", js, `{"name":"N"}`, 401, ""},
		{"unknown admin key", "PUT", "/v1/admin/users/u9", "afa_0123456789abcdef_" + strings.Repeat("0", 64), js, `{"name":"N"}`, 401, ""},
		{"revoked admin key", "PUT", "/v1/admin/users/u9", revokedToken, js, `{"name":"N"}`, 401, ""},
		{"a member's JWT", "PUT", "/v1/admin/users/u9", jwt, js, `{"name":"N"}`, 403, "admin keys only"},
		{"an organisation key", "DELETE", "/v1/admin/orgs/o1/keys/0123456789abcdef", orgKey, "", "", 403, "admin keys only"},
		{"a worker pass", "PUT", "/v1/admin/teams/t1/members/u2", pass, "", "", 403, "admin keys only"},
		{"a broker pass", "PUT", "/v1/admin/teams/t1/members/u2", brokerPass, "", "", 403, "admin keys only"},
		// Shaped like a credential of another kind, but none (issue 35 item 6): 401.
		{"a random string with two dots", "PUT", "/v1/admin/users/u9", "aaaa.bbbb.cccc", js, `{"name":"N"}`, 401, ""},
		{"a JWT signed with another key", "PUT", "/v1/admin/users/u9", strangerJWT, js, `{"name":"N"}`, 401, ""},
		{"an unknown organisation key", "PUT", "/v1/admin/users/u9", "afk_0123456789abcdef_" + strings.Repeat("0", 64), js, `{"name":"N"}`, 401, ""},
		{"a revoked organisation key", "PUT", "/v1/admin/users/u9", revokedOrgKey, js, `{"name":"N"}`, 401, ""},
		{"an unknown pass", "PUT", "/v1/admin/users/u9", "afp_0123456789abcdef_" + strings.Repeat("0", 64), js, `{"name":"N"}`, 401, ""},
		{"an organisation key with a wrong secret", "PUT", "/v1/admin/users/u9", wrongSecret(orgKey), js, `{"name":"N"}`, 401, ""},
		{"malformed id", "PUT", "/v1/admin/users/bad%20id", e.key, js, `{"name":"N"}`, 400, "id:"},
		{"id too long", "PUT", "/v1/admin/users/" + strings.Repeat("a", 65), e.key, js, `{"name":"N"}`, 400, "id:"},
		{"not JSON", "PUT", "/v1/admin/users/u9", e.key, js, `name=N`, 400, ""},
		{"two objects", "PUT", "/v1/admin/users/u9", e.key, js, `{"name":"N"}{"name":"M"}`, 400, ""},
		{"no content type", "PUT", "/v1/admin/users/u9", e.key, "", `{"name":"N"}`, 415, ""},
		{"form content type", "PUT", "/v1/admin/users/u9", e.key, "application/x-www-form-urlencoded", `{"name":"N"}`, 415, ""},
		{"oversized body", "PUT", "/v1/admin/teams/t1/members", e.key, js, huge, 413, ""},
		{"unknown field", "PUT", "/v1/admin/users/u9", e.key, js, `{"name":"N","admin":true}`, 400, "admin"},
		{"name of the wrong type", "PUT", "/v1/admin/users/u9", e.key, js, `{"name":7}`, 400, "name"},
		{"blank name", "PUT", "/v1/admin/teams/t9", e.key, js, `{"name":"  "}`, 400, "name"},
		{"control character in a name", "PUT", "/v1/admin/teams/t9", e.key, js, `{"name":"a\u0000b"}`, 400, "name"},
		{"name too long", "PUT", "/v1/admin/users/u9", e.key, js, `{"name":"` + strings.Repeat("n", 201) + `"}`, 400, "name"},
		{"org without environments", "PUT", "/v1/admin/orgs/o9", e.key, js, `{"name":"O","environments":[]}`, 400, "environments"},
		{"org with a repeated environment", "PUT", "/v1/admin/orgs/o9", e.key, js, `{"name":"O","environments":["a","a"]}`, 400, "environments"},
		{"org with a bad environment", "PUT", "/v1/admin/orgs/o9", e.key, js, `{"name":"O","environments":["a b"]}`, 400, "environments"},
		{"member of an unknown team", "PUT", "/v1/admin/teams/t9/members/u1", e.key, "", "", 404, "team"},
		{"unknown member", "PUT", "/v1/admin/teams/t1/members/u9", e.key, "", "", 404, "user"},
		{"removing from an unknown team", "DELETE", "/v1/admin/teams/t9/members/u1", e.key, "", "", 404, "team"},
		{"member list with an unknown user", "PUT", "/v1/admin/teams/t1/members", e.key, js, `{"members":["u2","u9"]}`, 404, "members"},
		{"member list with a bad id", "PUT", "/v1/admin/teams/t1/members", e.key, js, `{"members":["u 2"]}`, 400, "members"},
		{"member list missing", "PUT", "/v1/admin/teams/t1/members", e.key, js, `{}`, 400, "members"},
		{"member list of an unknown team", "PUT", "/v1/admin/teams/t9/members", e.key, js, `{"members":[]}`, 404, "team"},
		{"members of an unknown team", "GET", "/v1/admin/teams/t9/members", e.key, "", "", 404, "team"},
		{"agent in an unknown team", "PUT", "/v1/admin/agents/a1", e.key, js, `{"name":"A","team":"t9","org":"o1","environment":"prod"}`, 404, "team"},
		{"agent of an unknown org", "PUT", "/v1/admin/agents/a1", e.key, js, `{"name":"A","team":"t2","org":"o9","environment":"prod"}`, 404, "org"},
		{"agent in another org's environment", "PUT", "/v1/admin/agents/a1", e.key, js, `{"name":"A","team":"t2","org":"o2","environment":"staging"}`, 404, "environment"},
		{"agent without a team", "PUT", "/v1/admin/agents/a1", e.key, js, `{"name":"A","org":"o1","environment":"prod"}`, 400, "team"},
		{"agent with a malformed team", "PUT", "/v1/admin/agents/a1", e.key, js, `{"name":"A","team":"../t1","org":"o1","environment":"prod"}`, 400, "team"},
		{"key of an unknown org", "POST", "/v1/admin/orgs/o9/keys", e.key, js, `{"environment":"prod","scopes":["worker:logs:read"]}`, 404, "org"},
		{"key in an unknown environment", "POST", "/v1/admin/orgs/o2/keys", e.key, js, `{"environment":"staging","scopes":["worker:logs:read"]}`, 404, "environment"},
		{"key without scopes", "POST", "/v1/admin/orgs/o1/keys", e.key, js, `{"environment":"prod","scopes":[]}`, 400, "scopes"},
		{"key with a bad scope", "POST", "/v1/admin/orgs/o1/keys", e.key, js, `{"environment":"prod","scopes":["Worker Logs"]}`, 400, "scopes"},
		{"keys of an unknown org", "GET", "/v1/admin/orgs/o9/keys", e.key, "", "", 404, "org"},
		{"revoking a malformed key id", "DELETE", "/v1/admin/orgs/o1/keys/xyz", e.key, "", "", 400, "keyId"},
		{"unknown admin route", "GET", "/v1/admin/agents", e.key, "", "", 404, ""},
		{"a public route on the admin listener", "GET", "/v1/agents/a1/worker/view", jwt, "", "", 404, ""},
		{"wrong method", "POST", "/v1/admin/agents/a1", e.key, js, `{}`, 405, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.snapshot(t, ctx)
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			status, body := e.call(t, rctx, tt.method, tt.path, tt.bearer, tt.contentType, tt.body)
			if status != tt.want {
				t.Fatalf("status %d, want %d: %.300s", status, tt.want, body)
			}
			var eb struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal([]byte(body), &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
				t.Fatalf("body %.300q is not the error body", body)
			}
			if !strings.Contains(eb.Error.Message, tt.wantInMessage) {
				t.Errorf("message %q does not name %q", eb.Error.Message, tt.wantInMessage)
			}
			if after := e.snapshot(t, ctx); !maps.Equal(before, after) {
				t.Errorf("a refused request changed Redis:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
	if strings.Contains(e.logs.String(), "audit") {
		t.Errorf("a refused request wrote an audit line:\n%s", e.logs.String())
	}
}

// TestAdminChanges: each accepted change is what the stores then read, answers the
// document's shape, is idempotent where the route says so, and writes one audit line
// naming the admin key and the ids, never a secret.
func TestAdminChanges(t *testing.T) {
	ctx := testenv.Context(t, 60*time.Second)
	e := startAdmin(t, ctx)
	adminID := strings.Split(e.key, "_")[1]
	do := func(method, path, body string, want int) string {
		t.Helper()
		ct := ""
		if body != "" {
			ct = "application/json"
		}
		status, b := e.call(t, ctx, method, path, e.key, ct, body)
		if status != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, status, b, want)
		}
		return b
	}
	do("PUT", "/v1/admin/users/u3", `{"name":"Третий"}`, 200)
	do("PUT", "/v1/admin/teams/t3", `{"name":"Team 3"}`, 200)
	do("PUT", "/v1/admin/orgs/o3", `{"name":"Org 3","environments":["prod","dev"]}`, 200)
	if u, err := e.dir.User(ctx, "u3"); err != nil || u.Name != "Третий" {
		t.Fatalf("user u3: %+v %v", u, err)
	}

	// Members one at a time, idempotent.
	for range 2 {
		do("PUT", "/v1/admin/teams/t3/members/u3", "", 204)
	}
	if ok, err := e.dir.IsMember(ctx, "t3", "u3"); err != nil || !ok {
		t.Fatalf("u3 not a member of t3: %v", err)
	}
	for range 2 {
		do("DELETE", "/v1/admin/teams/t3/members/u3", "", 204)
	}
	if ok, _ := e.dir.IsMember(ctx, "t3", "u3"); ok {
		t.Fatal("u3 still a member of t3")
	}
	// The whole list.
	b := do("PUT", "/v1/admin/teams/t1/members", `{"members":["u2","u3"]}`, 200)
	if b != "{\"added\":[\"u2\",\"u3\"],\"removed\":[\"u1\"]}" {
		t.Errorf("set members: %s", b)
	}
	if b := do("GET", "/v1/admin/teams/t1/members", "", 200); b != `{"members":["u2","u3"]}` {
		t.Errorf("members: %s", b)
	}
	if agents, _ := e.dir.VisibleAgents(ctx, "u1"); len(agents) != 0 {
		t.Errorf("u1 removed from t1 still lists %v", agents)
	}

	// An agent created, then moved: its record names one team, and the listing follows.
	do("PUT", "/v1/admin/agents/a3", `{"name":"Agent 3","team":"t3","org":"o3","environment":"dev"}`, 200)
	do("PUT", "/v1/admin/agents/a3", `{"name":"Agent 3","team":"t2","org":"o3","environment":"prod"}`, 200)
	if a, err := e.dir.Agent(ctx, "a3"); err != nil || a.TeamID != "t2" || a.Environment != "prod" {
		t.Fatalf("a3 after the move: %+v %v", a, err)
	}
	if agents, _ := e.dir.VisibleAgents(ctx, "u2"); !slices.ContainsFunc(agents, func(a directory.Agent) bool { return a.ID == "a3" }) {
		t.Errorf("u2 of t2 does not list the moved agent: %v", agents)
	}
	for range 2 {
		do("DELETE", "/v1/admin/agents/a3", "", 204)
	}
	if _, err := e.dir.Agent(ctx, "a3"); err != directory.ErrNotFound {
		t.Fatalf("deleted agent: %v", err)
	}

	// Keys: created (shown once), listed without any part of the secret, revoked.
	b = do("POST", "/v1/admin/orgs/o1/keys", `{"environment":"staging","scopes":["worker:logs:read"]}`, 201)
	var created struct{ ID, Key string }
	if err := json.Unmarshal([]byte(b), &created); err != nil {
		t.Fatal(err)
	}
	k, err := e.creds.VerifyOrgKey(ctx, created.Key)
	if err != nil || k.OrgID != "o1" || k.Environment != "staging" || !k.HasScope(auth.ScopeWorkerLogsRead) {
		t.Fatalf("the new key does not verify as created: %+v %v", k, err)
	}
	secret := strings.Split(created.Key, "_")[2]
	list := do("GET", "/v1/admin/orgs/o1/keys", "", 200)
	if !strings.Contains(list, created.ID) || strings.Contains(list, secret[:8]) || strings.Contains(list, "afk_") {
		t.Errorf("key list %s: want the id and no part of the secret", list)
	}
	do("DELETE", "/v1/admin/orgs/o2/keys/"+created.ID, "", 204) // another organisation's path: nothing happens
	if _, err := e.creds.VerifyOrgKey(ctx, created.Key); err != nil {
		t.Fatalf("revoking through another organisation's path revoked the key: %v", err)
	}
	for range 2 {
		do("DELETE", "/v1/admin/orgs/o1/keys/"+created.ID, "", 204)
	}
	if _, err := e.creds.VerifyOrgKey(ctx, created.Key); err != auth.ErrUnauthenticated {
		t.Fatalf("revoked key: %v", err)
	}
	if list := do("GET", "/v1/admin/orgs/o1/keys", "", 200); strings.Contains(list, created.ID) {
		t.Errorf("revoked key still listed: %s", list)
	}

	// The audit: one line per change, with the admin key's id and no secret.
	logs := e.logs.String()
	for _, action := range []string{"user.put", "team.put", "org.put", "member.add", "member.remove", "members.set", "agent.put", "agent.delete", "orgkey.create", "orgkey.revoke"} {
		if !strings.Contains(logs, fmt.Sprintf(`"action":%q`, action)) {
			t.Errorf("no audit line for %s", action)
		}
	}
	if n := strings.Count(logs, `"adminKey":"`+adminID+`"`); n < 14 {
		t.Errorf("%d audit lines name the admin key, want one per change", n)
	}
	if strings.Contains(logs, secret) || strings.Contains(logs, strings.Split(e.key, "_")[2]) {
		t.Error("a secret is in the log")
	}
}

// TestAdminChangesBumpTheGeneration: every change increments the directory's
// generation, which the refusal memory reads (access/refusals.go).
func TestAdminChangesBumpTheGeneration(t *testing.T) {
	ctx := testenv.Context(t, 30*time.Second)
	e := startAdmin(t, ctx)
	g0, err := e.dir.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st, b := e.call(t, ctx, "PUT", "/v1/admin/teams/t2/members/u1", e.key, "", ""); st != 204 {
		t.Fatalf("%d %s", st, b)
	}
	if g1, err := e.dir.Generation(ctx); err != nil || g1 <= g0 {
		t.Fatalf("generation %d after a change, was %d (%v)", g1, g0, err)
	}
}

// TestAdminRefusesAmbiguousMembers: on every admin route that takes a body, a member
// given twice, a member in another case than the field's and a member that is no field
// at all each answer 400 naming that member, and the directory is what it was (issue
// 35: {"team":"t1","TEAM":"t2"} moved an agent to t2, encoding/json matching names in
// any case and keeping the last of two).
func TestAdminRefusesAmbiguousMembers(t *testing.T) {
	ctx := testenv.Context(t, 60*time.Second)
	e := startAdmin(t, ctx)
	routes := []struct {
		method, path string
		// members are the body's members but the one under test, written out; field is
		// that one, and good and other two values it may take.
		members, field, good, other string
	}{
		{"PUT", "/v1/admin/users/u1", ``, "name", `"User"`, `"Renamed"`},
		{"PUT", "/v1/admin/teams/t1", ``, "name", `"Team"`, `"Renamed"`},
		{"PUT", "/v1/admin/orgs/o1", `"name":"Org",`, "environments", `["prod","staging"]`, `["prod"]`},
		{"PUT", "/v1/admin/teams/t1/members", ``, "members", `["u1"]`, `["u2"]`},
		{"PUT", "/v1/admin/agents/a1", `"name":"Agent","org":"o1","environment":"prod",`, "team", `"t1"`, `"t2"`},
		{"POST", "/v1/admin/orgs/o1/keys", `"environment":"prod",`, "scopes", `["worker:logs:read"]`, `["worker:logs:write"]`},
	}
	for _, r := range routes {
		upper := strings.ToUpper(r.field)
		tests := []struct {
			name, body, wantInMessage string
		}{
			{"duplicate", `{` + r.members + `"` + r.field + `":` + r.good + `,"` + r.field + `":` + r.other + `}`, `"` + r.field + `"`},
			{"case variant", `{` + r.members + `"` + r.field + `":` + r.good + `,"` + upper + `":` + r.other + `}`, `"` + upper + `"`},
			{"case variant alone", `{` + r.members + `"` + upper + `":` + r.other + `}`, `"` + upper + `"`},
			{"unknown member", `{` + r.members + `"` + r.field + `":` + r.good + `,"owner":"u2"}`, `"owner"`},
		}
		for _, tt := range tests {
			t.Run(r.method+" "+r.path+" "+tt.name, func(t *testing.T) {
				before := e.snapshot(t, ctx)
				status, body := e.call(t, ctx, r.method, r.path, e.key, "application/json", tt.body)
				if status != http.StatusBadRequest {
					t.Fatalf("%s: status %d, want 400: %.300s", tt.body, status, body)
				}
				var eb struct {
					Error struct{ Code, Message string }
				}
				if err := json.Unmarshal([]byte(body), &eb); err != nil || eb.Error.Code != "invalid" {
					t.Fatalf("body %.300q is not the error body of an invalid change", body)
				}
				if !strings.Contains(eb.Error.Message, tt.wantInMessage) {
					t.Errorf("message %q does not name %s", eb.Error.Message, tt.wantInMessage)
				}
				if after := e.snapshot(t, ctx); !maps.Equal(before, after) {
					t.Errorf("a refused body changed Redis:\nbefore %v\nafter  %v", before, after)
				}
			})
		}
	}
	// Read back through the directory: the agent of the report is where it was.
	if a, err := e.dir.Agent(ctx, "a1"); err != nil || a.TeamID != "t1" {
		t.Fatalf("agent a1 after the refused moves: %+v %v", a, err)
	}
	if m, err := e.dir.Members(ctx, "t1"); err != nil || !slices.Equal(m, []string{"u1"}) {
		t.Fatalf("members of t1 after the refused lists: %v %v", m, err)
	}
	if keys, err := e.creds.ListOrgKeys(ctx, "o1"); err != nil || len(keys) != 0 {
		t.Fatalf("keys of o1 after the refused mints: %v %v", keys, err)
	}
}
