package view_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/jpeg"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/access"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

// TestViewRoundTrips counts the Redis round trips of views on a real redis-server (a
// command alone or a pipeline, each on the client of the process that makes it) and
// the commands the server ran for them (15 for a served view, 9 for a 429). A
// served view makes five in all: four at the requesting replica (the first check's
// reads with the session pointer, the session's record, the gate with the grant, the
// re-check) and one at the consume route (the broker pass and the grant in one
// script); the owner replica makes none (it checks the request's proof). The owner,
// the worker and the broker are played by the requester below, which does what they do
// with Redis and nothing else — the wire between them is e2e's. What each removed round
// trip guarded is still tested where it was: TestGateWritesTheGrant (a refused view's
// grant is deleted), TestGrantConsume (pass and grant in one script: unknown, revoked,
// worker pass, another session), TestRequestProof, TestHubRelaysView and
// reliability's TestViewFloodOnTheBusIsPacedAtTheOwner (a request no replica made, or
// a replay, never reaches the worker).
func TestViewRoundTrips(t *testing.T) {
	srv := testenv.Redis(t)
	ctx := testenv.Context(t, 30*time.Second)
	dep := testenv.Deployment(t)
	replica := testenv.RedisClient(t, srv, 0)  // the requesting replica's
	consumer := testenv.RedisClient(t, srv, 0) // the consume route's
	var replicaTrips, consumeTrips atomic.Int32
	replica.AddHook(countTrips{&replicaTrips})
	consumer.AddHook(countTrips{&consumeTrips})

	creds := auth.NewStore(replica, dep, nil)
	dir := directory.NewStore(replica, dep)
	sessions := session.NewStore(replica, creds, dep, session.Policy{}, nil)
	for _, err := range []error{
		dir.PutOrg(ctx, directory.Org{ID: "o1", Name: "Org", Environments: []string{"prod"}}),
		dir.PutTeam(ctx, directory.Team{ID: "t1", Name: "Team"}),
		dir.PutUser(ctx, directory.User{ID: "u-alice", Name: "Alice"}),
		dir.AddMember(ctx, "t1", "u-alice"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dir.PutAgent(ctx, directory.Agent{ID: "agent-1", Name: "Scout", TeamID: "t1", OrgID: "o1", Environment: "prod"}); err != nil {
		t.Fatal(err)
	}
	sess, passes, err := sessions.Start(ctx, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	hello := session.Hello{ImageTag: "worker:test", BootstrapRevision: wire.BootstrapRevision, Features: []string{wire.FeatureBrowserView}}
	if err := sessions.Attach(ctx, sess.ID, "r2", "04ab", hello); err != nil {
		t.Fatal(err)
	}
	claim, ok := auth.ClaimPass(passes.Broker)
	if !ok {
		t.Fatal("the broker pass claims nothing")
	}

	grants := view.NewGrants(replica, dep, testKeys, 0)
	owner := &ownerAndBroker{
		t: t, session: sess.ID, proofs: grants, claim: claim, frame: tinyJPEG(t),
		consume: view.NewGrants(consumer, dep, testKeys, 0),
	}
	svc := view.NewService(view.ServiceConfig{
		Redis: replica, Gate: view.NewGate(replica, dep, 0, 0), Grants: grants, Sessions: sessions,
		Directory: dir, Creds: creds, Requester: owner, Namespace: mustNamespace(t, dep), Log: testenv.Logger(t),
	})
	rules := access.New(dir)
	stats := testenv.RedisClient(t, srv, 0) // reads the server's counts, outside the counted clients
	var commands int                        // the server's, in the last look
	look := func(user string) (res view.Result, atReplica, atConsume int32, err error) {
		t.Helper()
		replicaTrips.Store(0)
		consumeTrips.Store(0)
		before := commandCalls(ctx, t, stats)
		res, err = svc.View(ctx, "agent-1", "user:"+user, rules.Member(user, "agent-1"))
		commands = commandCalls(ctx, t, stats) - before
		return res, replicaTrips.Load(), consumeTrips.Load(), err
	}

	// The first view loads the gate's script (one round trip more, once per server).
	if res, _, _, err := look("u-alice"); err != nil || res.Page == nil {
		t.Fatalf("first view: %+v, %v", res, err)
	}
	if err := replica.Del(ctx, "agentfy:"+dep+":gate:{a:agent-1}").Err(); err != nil {
		t.Fatal(err)
	}
	if err := replica.Del(ctx, replica.Keys(ctx, "agentfy:"+dep+":pace:*").Val()...).Err(); err != nil {
		t.Fatal(err)
	}
	res, atReplica, atConsume, err := look("u-alice")
	if err != nil || res.Page == nil || res.Page.Title != "agent-1" {
		t.Fatalf("view: %+v, %v", res, err)
	}
	if atReplica != 4 || atConsume != 1 || owner.proven.Load() != 2 {
		t.Errorf("a served view: %d round trips at the requesting replica and %d at the consume route (%d proofs checked), want 4 and 1", atReplica, atConsume, owner.proven.Load())
	}
	// Its commands, as the server counts them (a script's own included): the first
	// check 3 (the agent's record, the membership, the session pointer), the session's
	// record 1, the gate 3 (its script and two SETs) and the grant 1, the re-check 3
	// (the agent's record, the membership, the session's record), the consume 4 (its
	// script, the pass's HMGET, the grant's GET and DEL).
	if commands != servedViewCommands {
		t.Errorf("a served view: %d Redis commands, want %d", commands, servedViewCommands)
	}
	// Refused by the gate: the grant written beside the decision is deleted again.
	_, atReplica, atConsume, err = look("u-alice")
	if !errors.Is(err, view.ErrRateLimited) || atReplica != 4 || atConsume != 0 {
		t.Errorf("a refused view: %v in %d and %d round trips, want 429 in 4 (the delete included) and 0", err, atReplica, atConsume)
	}
	// The first check 3, the session 1, the gate 3 (its script, the window's SET, the
	// pace's PTTL), the grant's SET and DEL.
	if commands != 9 {
		t.Errorf("a refused view: %d Redis commands, want 9", commands)
	}
	if n := len(replica.Keys(ctx, "agentfy:"+dep+":cap:*").Val()); n != 0 {
		t.Errorf("%d grants left in Redis, want none", n)
	}
	// No live session: the first check and the session lookup, no gate.
	if _, err := sessions.Stop(ctx, sess.ID, "operator"); err != nil {
		t.Fatal(err)
	}
	res, atReplica, _, err = look("u-alice")
	if err != nil || res.Live || atReplica > 3 {
		t.Errorf("a view of a stopped session: %+v, %v in %d round trips, want live:false in at most 3", res, err, atReplica)
	}
}

// servedViewCommands is what a served view costs Redis in commands (BENCHMARKS.md §7
// measures it per frame under load).
const servedViewCommands = 15

// commandCalls is how many commands the server has run, as INFO commandstats counts them
// (a script's own commands included), but for the connections' own (HELLO, CLIENT,
// SELECT, AUTH, PING) and this reading's INFO.
func commandCalls(ctx context.Context, t *testing.T, rdb redis.UniversalClient) int {
	t.Helper()
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		switch strings.TrimPrefix(name, "cmdstat_") {
		case "info", "hello", "client|setinfo", "client", "select", "auth", "ping":
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		c, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		n += c
	}
	return n
}

// ownerAndBroker is a view.Requester that plays the owner replica, the worker and the
// broker of one session with Redis as they do: the owner checks the request's proof
// (no Redis), the broker redeems the grant at the consume route (one script) and seals
// a fixed page named for the agent to the key it learns.
type ownerAndBroker struct {
	t       *testing.T
	session string
	proofs  *view.Grants
	consume *view.Grants
	claim   auth.PassClaim
	frame   []byte
	proven  atomic.Int32
}

func (o *ownerAndBroker) Connected() bool { return true }

func (o *ownerAndBroker) RequestMsg(ctx context.Context, msg *nats.Msg) ([]byte, error) {
	requestID := string(msg.Data)
	if !o.proofs.Vouched(requestID, o.session, msg.Header.Get(bus.HeaderProof), time.Now()) {
		return nil, &bus.RemoteError{Code: wire.ReasonRefused}
	}
	o.proven.Add(1)
	pub, _, err := o.consume.Consume(ctx, o.claim, requestID)
	if err != nil {
		return nil, &bus.RemoteError{Code: wire.ReasonRefused}
	}
	key, err := envelope.ParsePublicKey(pub)
	if err != nil {
		return nil, err
	}
	plain, err := json.Marshal(&wire.Page{
		URL: "https://example.invalid/", Title: "agent-1", CapturedAt: wire.FormatCapturedAt(time.Now()),
		ContentType: wire.ContentTypeJPEG, Data: base64.StdEncoding.EncodeToString(o.frame),
	})
	if err != nil {
		return nil, err
	}
	return envelope.SealJSON(rand.Reader, key, requestID, plain)
}

func tinyJPEG(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewGray(image.Rect(0, 0, 16, 16)), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func mustNamespace(t *testing.T, dep string) bus.Namespace {
	t.Helper()
	ns, err := bus.NewNamespace(dep, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

var _ redis.Hook = countTrips{}
