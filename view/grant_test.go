package view_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/keyspace"
	"github.com/agentfy/agentfy/view"
)

func requestID(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

const pubKey = "04aabb" // the store treats the key as opaque text

// testKeys is the replicas' grant key of these tests.
var testKeys = view.GrantKeys{[]byte("0123456789abcdef0123456789abcdef")}

// pass is a session's pass as the consume route meets it: its id, in whose slot the
// session's grants live, and what its token claims.
type pass struct {
	id    string
	claim auth.PassClaim
}

// issue mints a pass of role for sessionID in Redis, as session.Store.Start does.
func issue(t testing.TB, ctx context.Context, rdb redis.UniversalClient, dep string, role auth.Role, sessionID string) pass {
	t.Helper()
	token, p, err := auth.NewStore(rdb, dep, nil).IssuePass(ctx, role, sessionID, "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	claim, ok := auth.ClaimPass(token)
	if !ok {
		t.Fatalf("pass %s claims nothing", p.ID)
	}
	return pass{id: p.ID, claim: claim}
}

func TestGrantConsume(t *testing.T) {
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 3)
	ctx := testenv.Context(t, 30*time.Second)
	dep := testenv.Deployment(t)
	grants := view.NewGrants(rdb, dep, testKeys, 0)
	a := issue(t, ctx, rdb, dep, auth.RoleBroker, "sessA")
	b := issue(t, ctx, rdb, dep, auth.RoleBroker, "sessB")

	t.Run("once", func(t *testing.T) {
		id := requestID(t)
		if err := grants.Put(ctx, id, "sessA", a.id, pubKey); err != nil {
			t.Fatal(err)
		}
		got, sess, err := grants.Consume(ctx, a.claim, id)
		if err != nil || got != pubKey || sess != "sessA" {
			t.Fatalf("first consume = %q, %q, %v; want %q of sessA", got, sess, err, pubKey)
		}
		if _, _, err := grants.Consume(ctx, a.claim, id); !errors.Is(err, view.ErrGrantNotFound) {
			t.Fatalf("replay: err = %v, want ErrGrantNotFound", err)
		}
	})
	t.Run("other session refused and leaves it usable", func(t *testing.T) {
		id := requestID(t)
		if err := grants.Put(ctx, id, "sessA", a.id, pubKey); err != nil {
			t.Fatal(err)
		}
		if _, _, err := grants.Consume(ctx, b.claim, id); !errors.Is(err, view.ErrGrantNotFound) {
			t.Fatalf("other session: err = %v, want ErrGrantNotFound", err)
		}
		if got, _, err := grants.Consume(ctx, a.claim, id); err != nil || got != pubKey {
			t.Fatalf("after other session's attempt: %q, %v", got, err)
		}
	})
	t.Run("a grant under the pass of another session is refused and left", func(t *testing.T) {
		// A grant a replica wrote for sessB into sessA's pass's slot (a bug, or a Redis
		// writer moving it): sessA's broker cannot redeem it, the script leaves it.
		id := requestID(t)
		if err := grants.Put(ctx, id, "sessB", a.id, pubKey); err != nil {
			t.Fatal(err)
		}
		if _, _, err := grants.Consume(ctx, a.claim, id); !errors.Is(err, view.ErrGrantNotFound) {
			t.Fatalf("err = %v, want ErrGrantNotFound", err)
		}
		if n, _ := rdb.Exists(ctx, keyspace.For(dep).Grant(a.id, id)).Result(); n != 1 {
			t.Fatal("the refused consume deleted the grant")
		}
	})
	t.Run("credentials: unknown, wrong secret, revoked, worker pass", func(t *testing.T) {
		id := requestID(t)
		if err := grants.Put(ctx, id, "sessA", a.id, pubKey); err != nil {
			t.Fatal(err)
		}
		worker := issue(t, ctx, rdb, dep, auth.RoleWorker, "sessA")
		revoked := issue(t, ctx, rdb, dep, auth.RoleBroker, "sessA")
		if err := auth.NewStore(rdb, dep, nil).RevokePasses(ctx, revoked.id); err != nil {
			t.Fatal(err)
		}
		wrongSecret := auth.PassClaim{ID: a.id, Hash: strings.Repeat("0", 64)}
		for name, tc := range map[string]struct {
			claim auth.PassClaim
			want  error
		}{
			"unknown pass":              {auth.PassClaim{ID: "0123456789abcdef", Hash: a.claim.Hash}, auth.ErrUnauthenticated},
			"wrong secret":              {wrongSecret, auth.ErrUnauthenticated},
			"hash of no length":         {auth.PassClaim{ID: a.id}, auth.ErrUnauthenticated},
			"revoked":                   {revoked.claim, auth.ErrUnauthenticated},
			"the session's worker pass": {worker.claim, auth.ErrForbidden},
		} {
			if _, _, err := grants.Consume(ctx, tc.claim, id); !errors.Is(err, tc.want) {
				t.Errorf("%s: err = %v, want %v", name, err, tc.want)
			}
		}
		// Under the wrong secret, the grant is still there for the real pass.
		if got, _, err := grants.Consume(ctx, a.claim, id); err != nil || got != pubKey {
			t.Fatalf("after the refused credentials: %q, %v", got, err)
		}
	})
	t.Run("unknown and malformed ids", func(t *testing.T) {
		for _, id := range []string{requestID(t), "", "xyz", requestID(t)[:63] + "G"} {
			if _, _, err := grants.Consume(ctx, a.claim, id); !errors.Is(err, view.ErrGrantNotFound) {
				t.Fatalf("consume(%q): err = %v", id, err)
			}
		}
	})
	t.Run("put rejects a duplicate id, a bad id and a grant without its pass", func(t *testing.T) {
		id := requestID(t)
		if err := grants.Put(ctx, id, "sessA", a.id, pubKey); err != nil {
			t.Fatal(err)
		}
		if err := grants.Put(ctx, id, "sessB", a.id, pubKey); err == nil {
			t.Fatal("duplicate put succeeded")
		}
		if err := grants.Put(ctx, "nothex", "sessA", a.id, pubKey); err == nil {
			t.Fatal("bad id accepted")
		}
		if err := grants.Put(ctx, requestID(t), "sessA", "", pubKey); err == nil {
			t.Fatal("a grant without a broker pass accepted")
		}
	})
	t.Run("stored value holds only session, public key and MAC, with a 10 s lifetime", func(t *testing.T) {
		id := requestID(t)
		if err := grants.Put(ctx, id, "sessA", a.id, pubKey); err != nil {
			t.Fatal(err)
		}
		keys, err := rdb.Keys(ctx, "*"+id+"*").Result()
		if err != nil || len(keys) != 1 || keys[0] != keyspace.For(dep).Grant(a.id, id) {
			t.Fatalf("keys = %v, %v", keys, err)
		}
		v, _ := rdb.Get(ctx, keys[0]).Result()
		if !regexp.MustCompile(`^\{"sessionId":"sessA","publicKey":"04aabb","mac":"[A-Za-z0-9_-]{43}"\}$`).MatchString(v) {
			t.Fatalf("stored %s", v)
		}
		ttl, _ := rdb.PTTL(ctx, keys[0]).Result()
		if ttl <= 9*time.Second || ttl > view.GrantTTL {
			t.Fatalf("ttl = %v", ttl)
		}
	})
}

// TestRequestProof: the owner believes a view request's id only with a proof that a
// replica of this deployment made it for this session, lately.
func TestRequestProof(t *testing.T) {
	grants := view.NewGrants(nil, "dev", testKeys, 0)
	id, now := requestID(t), time.Now().Truncate(time.Millisecond) // a proof dates to the millisecond
	proof, err := grants.Proof(id, "sessA", now)
	if err != nil {
		t.Fatal(err)
	}
	if !grants.Vouched(id, "sessA", proof, now) || !grants.Vouched(id, "sessA", proof, now.Add(view.GrantTTL)) ||
		!grants.Vouched(id, "sessA", proof, now.Add(-view.ProofSkew)) {
		t.Fatal("a replica's proof refused")
	}
	rotated := view.NewGrants(nil, "dev", view.GrantKeys{[]byte("the next grant MAC key, 32 bytes"), testKeys[0]}, 0)
	if !rotated.Vouched(id, "sessA", proof, now) {
		t.Fatal("a proof under a key still listed refused")
	}
	issued, mac, _ := strings.Cut(proof, ".")
	other := view.NewGrants(nil, "other", testKeys, 0)
	otherProof, _ := other.Proof(id, "sessA", now)
	foreign, _ := view.NewGrants(nil, "dev", view.GrantKeys{[]byte("another deployment's key 32 byte")}, 0).Proof(id, "sessA", now)
	for name, tc := range map[string]struct {
		id, session, proof string
		at                 time.Time
	}{
		"another request":          {requestID(t), "sessA", proof, now},
		"another session":          {id, "sessB", proof, now},
		"another deployment":       {id, "sessA", otherProof, now},
		"another key":              {id, "sessA", foreign, now},
		"stale":                    {id, "sessA", proof, now.Add(view.GrantTTL + time.Millisecond)},
		"from the future":          {id, "sessA", proof, now.Add(-view.ProofSkew - time.Millisecond)},
		"redated":                  {id, "sessA", strconv.FormatInt(now.UnixMilli()+1, 10) + "." + mac, now},
		"date with a leading zero": {id, "sessA", "0" + issued + "." + mac, now},
		"no MAC":                   {id, "sessA", issued + ".", now},
		"none":                     {id, "sessA", "", now},
		"MAC not base64":           {id, "sessA", issued + ".!!", now},
		"a bad request id":         {"xyz", "sessA", proof, now},
		"no session":               {id, "", proof, now},
	} {
		if grants.Vouched(tc.id, tc.session, tc.proof, tc.at) {
			t.Errorf("%s: vouched", name)
		}
	}
	if _, err := view.NewGrants(nil, "dev", nil, 0).Proof(id, "sessA", now); err == nil {
		t.Error("a store without a key made a proof")
	}
}

// TestGrantForged plays a Redis writer who is not a replica: it rewrites a
// grant between the request and the consume (the destination key swapped for its
// own, the MAC kept or dropped or copied from another grant), or writes one of its
// own. The consume refuses each as forged, consumes it all the same, and the key of the
// real viewer never leaves for the attacker's; a grant under a key the replicas
// rotated out (second in the list) still redeems.
func TestGrantForged(t *testing.T) {
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	ctx := testenv.Context(t, 30*time.Second)
	dep := testenv.Deployment(t)
	grants := view.NewGrants(rdb, dep, testKeys, 0)
	keys := keyspace.For(dep)
	a := issue(t, ctx, rdb, dep, auth.RoleBroker, "sessA")
	const attacker = "04ffff"
	stored := func(id string) map[string]string {
		var m map[string]string
		if err := json.Unmarshal([]byte(rdb.Get(ctx, keys.Grant(a.id, id)).Val()), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	write := func(id string, m map[string]string) {
		b, _ := json.Marshal(m)
		if err := rdb.Set(ctx, keys.Grant(a.id, id), b, 0).Err(); err != nil { // SET … as the attacker would, XX KEEPTTL or not
			t.Fatal(err)
		}
	}
	other := requestID(t)
	if err := grants.Put(ctx, other, "sessA", a.id, pubKey); err != nil {
		t.Fatal(err)
	}
	otherMAC := stored(other)["mac"]
	for name, forge := range map[string]func(id string, m map[string]string){
		"key swapped, MAC kept":    func(id string, m map[string]string) { m["publicKey"] = attacker; write(id, m) },
		"key swapped, MAC dropped": func(id string, m map[string]string) { m["publicKey"] = attacker; delete(m, "mac"); write(id, m) },
		"MAC of another request":   func(id string, m map[string]string) { m["publicKey"] = pubKey; m["mac"] = otherMAC; write(id, m) },
		"MAC not base64":           func(id string, m map[string]string) { m["mac"] = "!!"; write(id, m) },
		"written without any Put": func(id string, _ map[string]string) {
			write(id, map[string]string{"sessionId": "sessA", "publicKey": attacker})
		},
		"session swapped, MAC kept": func(id string, m map[string]string) { m["sessionId"] = "sessA"; write(id, m) },
		// The attacker's key beside the real one under a name in another case: Lua's
		// cjson and a case-blind Go reader would each take another member.
		"key twice, in two cases": func(id string, m map[string]string) {
			raw := `{"sessionId":"sessA","publicKey":"` + attacker + `","PublicKey":"` + m["publicKey"] + `","mac":"` + m["mac"] + `"}`
			if err := rdb.Set(ctx, keys.Grant(a.id, id), raw, 0).Err(); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			id := requestID(t)
			sess := "sessA"
			if name == "session swapped, MAC kept" {
				sess = "sessB" // stored for another session, redirected to A
			}
			var m map[string]string
			if name != "written without any Put" {
				if err := grants.Put(ctx, id, sess, a.id, pubKey); err != nil {
					t.Fatal(err)
				}
				m = stored(id)
			}
			forge(id, m)
			got, _, err := grants.Consume(ctx, a.claim, id)
			if !errors.Is(err, view.ErrGrantForged) || got != "" {
				t.Fatalf("consume = %q, %v; want ErrGrantForged", got, err)
			}
			if _, _, err := grants.Consume(ctx, a.claim, id); !errors.Is(err, view.ErrGrantNotFound) {
				t.Fatalf("a forged grant was left to redeem again: %v", err)
			}
		})
	}
	t.Run("another deployment's replicas", func(t *testing.T) {
		id := requestID(t)
		if err := view.NewGrants(rdb, dep, view.GrantKeys{[]byte("another deployment's key 32 byte")}, 0).Put(ctx, id, "sessA", a.id, pubKey); err != nil {
			t.Fatal(err)
		}
		if _, _, err := grants.Consume(ctx, a.claim, id); !errors.Is(err, view.ErrGrantForged) {
			t.Fatalf("consume = %v; want ErrGrantForged", err)
		}
	})
	t.Run("rotation: the old key verifies while it is listed", func(t *testing.T) {
		next := view.GrantKeys{[]byte("the next grant MAC key, 32 bytes"), testKeys[0]}
		id := requestID(t)
		if err := grants.Put(ctx, id, "sessA", a.id, pubKey); err != nil { // a replica not yet rotated
			t.Fatal(err)
		}
		if got, _, err := view.NewGrants(rdb, dep, next, 0).Consume(ctx, a.claim, id); err != nil || got != pubKey {
			t.Fatalf("consume under the rotated keys = %q, %v", got, err)
		}
	})
	t.Run("no key: nothing written, nothing accepted", func(t *testing.T) {
		none := view.NewGrants(rdb, dep, nil, 0)
		id := requestID(t)
		if err := none.Put(ctx, id, "sessA", a.id, pubKey); err == nil {
			t.Fatal("a store without a key wrote a grant")
		}
		if err := grants.Put(ctx, id, "sessA", a.id, pubKey); err != nil {
			t.Fatal(err)
		}
		if _, _, err := none.Consume(ctx, a.claim, id); err == nil {
			t.Fatal("a store without a key redeemed a grant")
		}
	})
}

func TestParseGrantKeys(t *testing.T) {
	k := strings.Repeat("A", 43) // 32 zero bytes, unpadded base64url
	for list, want := range map[string]int{k: 1, k + ", " + k: 2, "": 0, "short": 0, k + "=": 0, k[:42] + "B": 0, " , ": 0} {
		keys, err := view.ParseGrantKeys(list)
		if len(keys) != want || (err == nil) != (want > 0) {
			t.Errorf("ParseGrantKeys(%q) = %d keys, %v; want %d", list, len(keys), err, want)
		}
	}
	a, err := view.DeriveGrantKey("replica password")
	if err != nil || len(a) != 1 || len(a[0]) != view.GrantKeyBytes {
		t.Fatalf("derived %v, %v", a, err)
	}
	b, _ := view.DeriveGrantKey("another password")
	if string(a[0]) == string(b[0]) {
		t.Fatal("two secrets derived one key")
	}
	if _, err := view.DeriveGrantKey(""); err == nil {
		t.Fatal("derived a key from nothing")
	}
}

func TestGrantExpiresInRedis(t *testing.T) {
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	ctx := testenv.Context(t, 30*time.Second)
	dep := testenv.Deployment(t)
	grants := view.NewGrants(rdb, dep, testKeys, 100*time.Millisecond)
	a := issue(t, ctx, rdb, dep, auth.RoleBroker, "sessA")
	id := requestID(t)
	if err := grants.Put(ctx, id, "sessA", a.id, pubKey); err != nil {
		t.Fatal(err)
	}
	// Wait for Redis's own expiry: the key count of the DB drops to the pass alone.
	testenv.WaitFor(t, 5*time.Second, "expiry", func() bool { n, _ := rdb.DBSize(ctx).Result(); return n == 1 })
	if _, _, err := grants.Consume(ctx, a.claim, id); !errors.Is(err, view.ErrGrantNotFound) {
		t.Fatalf("expired: err = %v, want ErrGrantNotFound", err)
	}
}

func TestGrantRedisDown(t *testing.T) {
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	ctx := testenv.Context(t, 30*time.Second)
	grants := view.NewGrants(rdb, testenv.Deployment(t), testKeys, 0)
	srv.Stop()
	_, _, err := grants.Consume(ctx, auth.PassClaim{ID: "0123456789abcdef", Hash: strings.Repeat("0", 64)}, requestID(t))
	if err == nil || errors.Is(err, view.ErrGrantNotFound) {
		t.Fatalf("redis down: err = %v, want a Redis error distinct from not found", err)
	}
}

// allow is the gate's verdict alone (Gate.Decide's Allowed).
func allow(ctx context.Context, g *view.Gate, agentID, caller string) (bool, error) {
	d, err := g.Decide(ctx, agentID, caller)
	return d.Allowed, err
}

func TestGateOneWinnerOf64AcrossTwoClients(t *testing.T) {
	srv := testenv.Redis(t)
	clients := []redis.UniversalClient{testenv.RedisClient(t, srv, 1), testenv.RedisClient(t, srv, 1)}
	ctx := testenv.Context(t, 30*time.Second)
	dep := testenv.Deployment(t)
	gates := []*view.Gate{view.NewGate(clients[0], dep, 0, 0), view.NewGate(clients[1], dep, 0, 0)}

	var wins atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			<-start
			ok, err := allow(ctx, gates[i%2], "agent-1", fmt.Sprintf("caller-%d", i))
			if err != nil {
				errs <- err
				return
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := wins.Load(); n != 1 {
		t.Fatalf("winners = %d, want exactly 1", n)
	}
	// Another agent has its own window.
	if ok, err := allow(ctx, gates[0], "agent-2", "caller-0"); err != nil || !ok {
		t.Fatalf("other agent: %v, %v", ok, err)
	}
	// The window is 2 s, kept by Redis.
	ttl, err := clients[0].PTTL(ctx, keyspace.For(dep).Gate("agent-1")).Result()
	if err != nil || ttl <= 1500*time.Millisecond || ttl > view.GateWindow {
		t.Fatalf("gate ttl = %v, %v", ttl, err)
	}
}

func TestGateOpensAfterWindow(t *testing.T) {
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	ctx := testenv.Context(t, 30*time.Second)
	g := view.NewGate(rdb, testenv.Deployment(t), 50*time.Millisecond, 50*time.Millisecond)
	if ok, _ := allow(ctx, g, "a", "u1"); !ok {
		t.Fatal("first request refused")
	}
	if ok, _ := allow(ctx, g, "a", "u2"); ok {
		t.Fatal("second request within the window allowed")
	}
	testenv.WaitFor(t, 5*time.Second, "expiry", func() bool { n, _ := rdb.DBSize(ctx).Result(); return n == 0 })
	if ok, err := allow(ctx, g, "a", "u1"); !ok || err != nil {
		t.Fatalf("after the window: %v, %v", ok, err)
	}
}

// TestLosingTheWindowTakesNoPace: a caller who loses the agent's window to another keeps
// its pace free — its 429 says the window, and it passes as soon as the window ends
// (before, its pace was taken with the refusal, and a caller obeying Retry-After: 2 got
// a second 429).
func TestLosingTheWindowTakesNoPace(t *testing.T) {
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	ctx := testenv.Context(t, 30*time.Second)
	dep := testenv.Deployment(t)
	g := view.NewGate(rdb, dep, time.Minute, time.Minute)
	if d, err := g.Decide(ctx, "agent-1", "user:alice"); err != nil || !d.Allowed {
		t.Fatalf("first request: %+v %v", d, err)
	}
	d, err := g.Decide(ctx, "agent-1", "key:partner")
	if err != nil || d.Allowed || d.RetryAfter != time.Minute {
		t.Fatalf("the window's loser: %+v %v, want refused with the window", d, err)
	}
	if n, _ := rdb.Exists(ctx, keyspace.For(dep).Pace("agent-1", "key:partner")).Result(); n != 0 {
		t.Fatal("the window's loser had its pace taken")
	}
	if err := rdb.Del(ctx, keyspace.For(dep).Gate("agent-1")).Err(); err != nil { // the window ends
		t.Fatal(err)
	}
	if d, err := g.Decide(ctx, "agent-1", "key:partner"); err != nil || !d.Allowed {
		t.Fatalf("the loser once the window ended: %+v %v, want allowed", d, err)
	}
}

// TestCallerPace: one caller gets one request per agent per pace, even when the agent's
// window is free; its refusal does not take the window from another caller; and its
// pace for one agent does not hold it back for another.
func TestCallerPace(t *testing.T) {
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	ctx := testenv.Context(t, 30*time.Second)
	dep := testenv.Deployment(t)
	g := view.NewGate(rdb, dep, 50*time.Millisecond, time.Minute)
	if ok, _ := allow(ctx, g, "agent-1", "user:alice"); !ok {
		t.Fatal("first request refused")
	}
	if ok, _ := allow(ctx, g, "agent-2", "user:alice"); !ok {
		t.Fatal("the pace of one agent held back another")
	}
	testenv.WaitFor(t, 5*time.Second, "the window's end", func() bool {
		n, _ := rdb.Exists(ctx, keyspace.For(dep).Gate("agent-1")).Result()
		return n == 0
	})
	if ok, _ := allow(ctx, g, "agent-1", "user:alice"); ok {
		t.Fatal("the same caller passed again within its pace")
	}
	if ok, _ := allow(ctx, g, "agent-1", "key:partner"); !ok {
		t.Fatal("a paced caller's refusal took the window from another caller")
	}
	ttl, err := rdb.PTTL(ctx, keyspace.For(dep).Pace("agent-1", "user:alice")).Result()
	if err != nil || ttl <= 50*time.Second || ttl > time.Minute {
		t.Fatalf("pace ttl %v, %v", ttl, err)
	}
	// A refusal by the caller's own pace says the time really left of it.
	if d, err := g.Decide(ctx, "agent-1", "user:alice"); err != nil || d.Allowed || d.RetryAfter <= 50*time.Second || d.RetryAfter > time.Minute {
		t.Fatalf("a paced caller's decision %+v, %v: want the pace's time left", d, err)
	}
	if strings.Contains(keyspace.For(dep).Pace("agent-1", "user:alice"), "alice") {
		t.Fatal("the pace key names the caller")
	}
}

// TestGateWritesTheGrant: the gate writes a view's grant in the round trip of its
// decision (one pipeline: counted by a hook on the client), keeps it when the request
// is let through and deletes it when refused, also on a server that has not seen the
// gate's script yet; the grant redeems as one Put wrote.
func TestGateWritesTheGrant(t *testing.T) {
	srv := testenv.Redis(t)
	rdb := testenv.RedisClient(t, srv, 0)
	ctx := testenv.Context(t, 30*time.Second)
	dep := testenv.Deployment(t)
	grants := view.NewGrants(rdb, dep, testKeys, 0)
	a := issue(t, ctx, rdb, dep, auth.RoleBroker, "sessA")
	var trips atomic.Int32
	rdb.AddHook(countTrips{&trips})
	g := view.NewGate(rdb, dep, 0, 0)
	decide := func(agent, caller string) (string, view.Decision) {
		t.Helper()
		id := requestID(t)
		grant, err := grants.New(id, "sessA", a.id, pubKey)
		if err != nil {
			t.Fatal(err)
		}
		trips.Store(0)
		d, err := g.Decide(ctx, agent, caller, grant)
		if err != nil {
			t.Fatal(err)
		}
		return id, d
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	first, d := decide("agent-1", "user:alice")
	if !d.Allowed || trips.Load() != 2 {
		t.Fatalf("first decision %+v in %d round trips, want allowed in 2 (the script not yet loaded)", d, trips.Load())
	}
	refused, d := decide("agent-1", "user:bob")
	if d.Allowed || trips.Load() != 2 {
		t.Fatalf("second decision %+v in %d round trips, want refused in 2 (the decision, the delete)", d, trips.Load())
	}
	won, d := decide("agent-2", "user:bob")
	if !d.Allowed || trips.Load() != 1 {
		t.Fatalf("decision %+v in %d round trips, want allowed in 1", d, trips.Load())
	}
	for id, want := range map[string]int64{first: 1, refused: 0, won: 1} {
		if n, _ := rdb.Exists(ctx, keyspace.For(dep).Grant(a.id, id)).Result(); n != want {
			t.Errorf("grant %s…: %d in Redis, want %d", id[:8], n, want)
		}
	}
	if got, _, err := grants.Consume(ctx, a.claim, won); err != nil || got != pubKey {
		t.Fatalf("the gate's grant redeems as %q, %v", got, err)
	}
}

// countTrips counts a client's round trips to Redis: a command alone or a pipeline, but
// not those that open a connection (HELLO, CLIENT SETINFO and the like).
type countTrips struct{ n *atomic.Int32 }

func (countTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c countTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "hello" && name != "client" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c countTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() != "client" {
			c.n.Add(1)
		}
		return next(ctx, cmds)
	}
}
