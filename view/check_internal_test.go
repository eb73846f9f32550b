package view

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/access"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/dev/redisserver"
	"github.com/agentfy/agentfy/internal/redisclient"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/session"
)

// checkEnv is a replica's view service on rdb, for deployment dep: agent-1 of team t1,
// organisation o1 and environment prod, u-alice a member of t1, a running session of
// agent-1, and an organisation key of o1 and prod that may read workers.
type checkEnv struct {
	svc      *Service
	ns       bus.Namespace
	dir      *directory.Store
	sessions *session.Store
	creds    *auth.Store
	sess     session.Session
	token    string
	key      auth.OrgKey
}

func newCheckEnv(tb testing.TB, ctx context.Context, rdb redis.UniversalClient, dep string) checkEnv {
	tb.Helper()
	creds := auth.NewStore(rdb, dep, nil)
	dir := directory.NewStore(rdb, dep)
	sessions := session.NewStore(rdb, creds, dep, session.Policy{}, nil)
	for _, err := range []error{
		dir.PutOrg(ctx, directory.Org{ID: "o1", Name: "Org", Environments: []string{"prod"}}),
		dir.PutTeam(ctx, directory.Team{ID: "t1", Name: "Team"}),
		dir.PutUser(ctx, directory.User{ID: "u-alice", Name: "Alice"}),
		dir.AddMember(ctx, "t1", "u-alice"),
	} {
		if err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := dir.PutAgent(ctx, directory.Agent{ID: "agent-1", Name: "Scout", TeamID: "t1", OrgID: "o1", Environment: "prod"}); err != nil {
		tb.Fatal(err)
	}
	sess, _, err := sessions.Start(ctx, "agent-1")
	if err != nil {
		tb.Fatal(err)
	}
	token, key, err := creds.CreateOrgKey(ctx, "o1", "prod", []string{auth.ScopeWorkerLogsRead})
	if err != nil {
		tb.Fatal(err)
	}
	ns, err := bus.NewNamespace(dep, 0)
	if err != nil {
		tb.Fatal(err)
	}
	e := checkEnv{ns: ns, dir: dir, sessions: sessions, creds: creds, sess: sess, token: token, key: key}
	e.svc = e.serviceOn(tb, rdb)
	return e
}

// serviceOn is a view service whose checks read through rdb, with the env's stores.
func (e checkEnv) serviceOn(tb testing.TB, rdb redis.UniversalClient) *Service {
	tb.Helper()
	return NewService(ServiceConfig{Redis: rdb, Sessions: e.sessions, Directory: e.dir, Creds: e.creds, Namespace: e.ns, Log: testenv.Logger(tb)})
}

// BenchmarkCheckReads is the round trip of each check of a view (check.go) on one
// redis-server: a member's first check (the agent's record, the membership and the
// session pointer), a member's re-check (the session's record in the pointer's place),
// and a partner's re-check (its key verified again beside the agent's record and the
// session's).
func BenchmarkCheckReads(b *testing.B) {
	srv := testenv.Redis(b)
	rdb := testenv.RedisClient(b, srv, 0)
	ctx := testenv.Context(b, 5*time.Minute)
	e := newCheckEnv(b, ctx, rdb, testenv.Deployment(b))
	member := access.Reads{Agent: true, Team: "t1", User: "u-alice"}
	partner := access.Reads{Agent: true, Token: e.token}
	b.Run("first", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f, id, err := e.svc.firstRead(ctx, "agent-1", member)
			if err != nil || id != e.sess.ID || f.AgentErr != nil || !f.Member {
				b.Fatalf("firstRead = %+v, %q, %v", f, id, err)
			}
		}
	})
	b.Run("recheck", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f, err := e.svc.recheckRead(ctx, "agent-1", e.sess.ID, member)
			if err != nil || f.AgentErr != nil || !f.Member {
				b.Fatalf("recheckRead = %+v, %v", f, err)
			}
		}
	})
	b.Run("recheck-partner", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f, err := e.svc.recheckRead(ctx, "agent-1", e.sess.ID, partner)
			if err != nil || f.AgentErr != nil || f.KeyErr != nil || f.Key.ID != e.key.ID {
				b.Fatalf("recheckRead = %+v, %v", f, err)
			}
		}
	})
}

// tripHook notes what a client sends: each pipeline's commands by name, and how many
// commands it sent alone. What opens a connection or learns a Cluster's slots (HELLO,
// CLIENT SETINFO, CLUSTER SLOTS) is not noted.
type tripHook struct {
	mu        sync.Mutex
	pipelines [][]string
	single    int
}

func notNoted(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "client", "cluster":
		return true
	}
	return false
}

func (h *tripHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *tripHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !notNoted(cmd) {
			h.mu.Lock()
			h.single++
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *tripHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && !notNoted(cmds[0]) {
			names := make([]string, len(cmds))
			for i, c := range cmds {
				names[i] = c.Name()
			}
			h.mu.Lock()
			h.pipelines = append(h.pipelines, names)
			h.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

// take returns what was noted since the last take, and forgets it.
func (h *tripHook) take() (pipelines [][]string, single int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	pipelines, single = h.pipelines, h.single
	h.pipelines, h.single = nil, 0
	return pipelines, single
}

// storesFacts are what the stores' own reads, one at a time, answer for want.
func storesFacts(ctx context.Context, e checkEnv, agentID string, want access.Reads) access.Facts {
	var f access.Facts
	if want.Token != "" {
		f.Key, f.KeyErr = e.creds.VerifyOrgKey(ctx, want.Token)
	}
	if want.Agent {
		f.Agent, f.AgentErr = e.dir.Agent(ctx, agentID)
	}
	if want.Team != "" {
		f.Member, f.MemberErr = e.dir.IsMember(ctx, want.Team, want.User)
	}
	if want.Generation {
		f.Generation, f.GenerationErr = e.dir.Generation(ctx)
	}
	return f
}

// sameFacts fails unless got and want hold the same values and errors that the
// stores' sentinels match alike.
func sameFacts(t *testing.T, what string, got, want access.Facts) {
	t.Helper()
	errs := [][2]error{{got.KeyErr, want.KeyErr}, {got.AgentErr, want.AgentErr}, {got.MemberErr, want.MemberErr}, {got.GenerationErr, want.GenerationErr}}
	for _, e := range errs {
		if (e[0] == nil) != (e[1] == nil) || errors.Is(e[0], auth.ErrUnauthenticated) != errors.Is(e[1], auth.ErrUnauthenticated) ||
			errors.Is(e[0], directory.ErrNotFound) != errors.Is(e[1], directory.ErrNotFound) {
			t.Fatalf("%s: error %v, the store's %v", what, e[0], e[1])
		}
	}
	got.KeyErr, got.AgentErr, got.MemberErr, got.GenerationErr = nil, nil, nil, nil
	want.KeyErr, want.AgentErr, want.MemberErr, want.GenerationErr = nil, nil, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: %+v, the stores' %+v", what, got, want)
	}
}

// TestCheckReadsAnswerAsTheStoresDo runs each check's reads (firstRead, recheckRead)
// and wants of each one round trip, a pipeline of one command per record read and the
// session's, and the answers of the stores' own reads (VerifyOrgKey, Agent, IsMember,
// Generation, Current).
func TestCheckReadsAnswerAsTheStoresDo(t *testing.T) {
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	ctx := testenv.Context(t, 30*time.Second)
	e := newCheckEnv(t, ctx, rdb, testenv.Deployment(t))
	hook := &tripHook{}
	rdb.AddHook(hook)

	check := func(name, agentID, sessionID string, want access.Reads, commands int, live bool) {
		t.Helper()
		hook.take()
		first, id, idErr := e.svc.firstRead(ctx, agentID, want)
		firstTrips, firstSingle := hook.take()
		again, stillErr := e.svc.recheckRead(ctx, agentID, sessionID, want)
		againTrips, againSingle := hook.take()
		for which, trips := range map[string][][]string{"first": firstTrips, "recheck": againTrips} {
			if len(trips) != 1 || len(trips[0]) != commands+1 {
				t.Fatalf("%s: the %s check sent %v; want one pipeline of %d commands", name, which, trips, commands+1)
			}
		}
		if firstSingle != 0 || againSingle != 0 {
			t.Fatalf("%s: the checks sent %d and %d commands alone; want none", name, firstSingle, againSingle)
		}
		stores := storesFacts(ctx, e, agentID, want)
		sameFacts(t, name+": first check", first, stores)
		sameFacts(t, name+": re-check", again, stores)
		cur, curErr := e.sessions.Current(ctx, agentID)
		if curErr != nil && !errors.Is(curErr, session.ErrNoSession) {
			t.Fatal(curErr)
		}
		if (idErr == nil) != (curErr == nil) || (idErr != nil && !errors.Is(idErr, session.ErrNoSession)) || (idErr == nil && id != cur.ID) {
			t.Fatalf("%s: the first check's session %q, %v; Current's %q, %v", name, id, idErr, cur.ID, curErr)
		}
		if live != (stillErr == nil) || (stillErr != nil && !errors.Is(stillErr, session.ErrNoSession)) {
			t.Fatalf("%s: the re-check's session: %v; want live %v", name, stillErr, live)
		}
	}

	everything := access.Reads{Agent: true, Team: "t1", User: "u-alice", Generation: true, Token: e.token}
	check("a member and a key", "agent-1", e.sess.ID, everything, 4, true)
	check("a stranger", "agent-1", e.sess.ID, access.Reads{Agent: true, Team: "t1", User: "u-bob"}, 2, true)
	check("another agent", "agent-2", e.sess.ID, access.Reads{Agent: true}, 1, false)
	// What no key can name is not read: the stores' answer is given.
	check("malformed ids", "bad id!", e.sess.ID, access.Reads{Agent: true, Token: "afk_garbage"}, 0, false)

	// Revoked, removed and stopped: each read says so.
	if _, err := e.creds.RevokeOrgKey(ctx, "o1", e.key.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.dir.RemoveMember(ctx, "t1", "u-alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sessions.Stop(ctx, e.sess.ID, "operator"); err != nil {
		t.Fatal(err)
	}
	check("after the changes", "agent-1", e.sess.ID, everything, 4, false)
	if err := rdb.Del(ctx, e.ns.Keys().Agent("agent-1")).Err(); err != nil {
		t.Fatal(err)
	}
	check("the agent gone", "agent-1", e.sess.ID, everything, 4, false)
}

// TestCheckReadsRedisErrorsAreTheirOwn fails each check's round trip and wants every
// read's error to be a Redis error: neither a refusal (ErrNotFound, ErrUnauthenticated)
// nor "not live" (ErrNoSession), and the agent's hint left as it was.
func TestCheckReadsRedisErrorsAreTheirOwn(t *testing.T) {
	judge := func(t *testing.T, what string, f access.Facts, sessionErr error) {
		t.Helper()
		for name, err := range map[string]error{"key": f.KeyErr, "agent": f.AgentErr, "membership": f.MemberErr, "generation": f.GenerationErr, "session": sessionErr} {
			if err == nil || errors.Is(err, auth.ErrUnauthenticated) || errors.Is(err, auth.ErrNotFound) ||
				errors.Is(err, directory.ErrNotFound) || errors.Is(err, session.ErrNoSession) {
				t.Errorf("%s: the %s's error is %v; want a Redis error", what, name, err)
			}
		}
		if f.Member || f.Key.ID != "" || f.Agent.ID != "" || f.Generation != 0 {
			t.Errorf("%s: values beside the errors: %+v", what, f)
		}
	}
	for _, tt := range []struct {
		name string
		fail func(context.Context, *redisserver.Server) context.Context
	}{
		{name: "cancelled context", fail: func(ctx context.Context, _ *redisserver.Server) context.Context {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return ctx
		}},
		{name: "server stopped", fail: func(ctx context.Context, srv *redisserver.Server) context.Context {
			srv.Stop()
			return ctx
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := testenv.Redis(t)
			rdb := testenv.RedisClient(t, srv, 0)
			ctx := testenv.Context(t, 30*time.Second)
			e := newCheckEnv(t, ctx, rdb, testenv.Deployment(t))
			everything := access.Reads{Agent: true, Team: "t1", User: "u-alice", Generation: true, Token: e.token}
			if _, _, err := e.svc.firstRead(ctx, "agent-1", everything); err != nil {
				t.Fatal(err)
			}
			hint, ok := e.dir.AgentHint("agent-1")
			if !ok {
				t.Fatal("no hint after a read of the agent")
			}
			ctx = tt.fail(ctx, srv)
			f, _, err := e.svc.firstRead(ctx, "agent-1", everything)
			judge(t, "first check", f, err)
			f, err = e.svc.recheckRead(ctx, "agent-1", e.sess.ID, everything)
			judge(t, "re-check", f, err)
			if h, ok := e.dir.AgentHint("agent-1"); !ok || h != hint {
				t.Errorf("hint after failed reads = %+v, %v; want %+v", h, ok, hint)
			}
		})
	}
}

// TestCheckReadsOnACluster runs each check's reads on a three-master Redis Cluster as
// the replica's Redis user: the records are in several slots on more than one master,
// and each check is one pipeline that the client sends to each master holding a record
// once, all at once, with the answers of the stores' own reads.
func TestCheckReadsOnACluster(t *testing.T) {
	ctx := testenv.Context(t, 2*time.Minute)
	const dep = "dev"
	ns, err := bus.NewNamespace(dep, 0)
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := deploy.GenerateSecrets()
	if err != nil {
		t.Fatal(err)
	}
	acl, err := deploy.RedisACL(ns, secrets)
	if err != nil {
		t.Fatal(err)
	}
	admin := redisserver.Admin{User: "test-admin", Password: "test-admin-password"}
	c, err := redisserver.StartCluster(ctx, redisserver.ClusterOptions{ACL: acl, Admin: admin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	client := func(user, password string, nodes *tripHook) redis.UniversalClient {
		rdb := redisclient.New(&redis.UniversalOptions{
			Addrs: c.Addrs(), Username: user, Password: password,
			DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, DisableIdentity: true,
		})
		t.Cleanup(func() { _ = rdb.Close() })
		cc, ok := rdb.(*redis.ClusterClient)
		if !ok {
			t.Fatalf("client is %T", rdb)
		}
		if nodes != nil {
			cc.OnNewNode(func(n *redis.Client) { n.AddHook(nodes) })
		}
		return rdb
	}
	e := newCheckEnv(t, ctx, client(admin.User, admin.Password, nil), dep)
	nodes, whole := &tripHook{}, &tripHook{}
	reader := client(deploy.RedisReplica, secrets.Redis[deploy.RedisReplica], nodes)
	reader.AddHook(whole)
	svc := e.serviceOn(t, reader)
	everything := access.Reads{Agent: true, Team: "t1", User: "u-alice", Generation: true, Token: e.token}

	keys := ns.Keys()
	claim, _ := auth.ClaimOrgKey(e.token)
	read := []string{keys.OrgKey(claim.ID()), keys.Agent("agent-1"), keys.TeamMembers("t1"), keys.DirectoryGeneration()}
	masters := func(session string) int {
		t.Helper()
		seen := map[string]bool{}
		for _, key := range append(slices.Clone(read), session) {
			m, err := c.MasterOf(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			seen[m.Addr()] = true
		}
		return len(seen)
	}
	firstMasters, recheckMasters := masters(keys.CurrentSession("agent-1")), masters(keys.Session(e.sess.ID))
	if firstMasters < 2 || recheckMasters < 2 {
		t.Fatalf("the records are on %d and %d masters: the test needs more than one", firstMasters, recheckMasters)
	}

	for _, tt := range []struct {
		name    string
		masters int
		run     func() (access.Facts, error)
	}{
		{name: "first check", masters: firstMasters, run: func() (access.Facts, error) {
			f, id, err := svc.firstRead(ctx, "agent-1", everything)
			if err == nil && id != e.sess.ID {
				t.Fatalf("first check: session %q, want %q", id, e.sess.ID)
			}
			return f, err
		}},
		{name: "re-check", masters: recheckMasters, run: func() (access.Facts, error) {
			return svc.recheckRead(ctx, "agent-1", e.sess.ID, everything)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			nodes.take()
			whole.take()
			f, err := tt.run()
			if err != nil {
				t.Fatal(err)
			}
			sameFacts(t, tt.name, f, storesFacts(ctx, e, "agent-1", everything))
			if f.AgentErr != nil || f.KeyErr != nil || !f.Member {
				t.Fatalf("%s: %+v", tt.name, f)
			}
			pipelines, single := whole.take()
			if len(pipelines) != 1 || len(pipelines[0]) != len(read)+1 || single != 0 {
				t.Fatalf("the client was given %v and %d commands alone; want one pipeline of %d", pipelines, single, len(read)+1)
			}
			perNode, single := nodes.take()
			sent := 0
			for _, p := range perNode {
				sent += len(p)
			}
			if len(perNode) != tt.masters || sent != len(read)+1 || single != 0 {
				t.Fatalf("the masters were sent %v and %d commands alone; want one pipeline to each of %d masters, %d commands in all", perNode, single, tt.masters, len(read)+1)
			}
		})
	}
}
