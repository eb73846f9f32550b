package reliability

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/channel"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/keyspace"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/wire"
)

const privilege = "Least privilege on NATS and Redis"

// violationWait bounds the wait for the server's asynchronous -ERR of a refused publish
// or subscription.
const violationWait = 5 * time.Second

// connectAs connects to the stack's NATS as role, collecting the server's asynchronous
// errors (permission violations) on the returned channel.
func connectAs(t *testing.T, role bus.Role) (*nats.Conn, <-chan error) {
	t.Helper()
	errs := make(chan error, 64)
	cfg := st.NATSConfig(role, "reliability-"+string(role))
	nc, err := nats.Connect(strings.Join(cfg.Servers, ","), nats.UserInfo(cfg.User, cfg.Password),
		nats.CustomInboxPrefix(cfg.InboxPrefix), nats.Timeout(5*time.Second),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, errs
}

// violation waits for the server to refuse something that mentions subject.
func violation(t *testing.T, errs <-chan error, subject string) {
	t.Helper()
	deadline := time.After(violationWait)
	for {
		select {
		case err := <-errs:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), subject) {
				return
			}
		case <-deadline:
			t.Fatalf("no permissions violation for %s within %v", subject, violationWait)
		}
	}
}

func TestBusRefusesAClientWithoutCredential(t *testing.T) {
	observed := ""
	record(t, privilege, "a NATS client without a credential, or with a wrong password, cannot connect", &observed)
	_, errNone := nats.Connect(st.NATS.ClientURL(), nats.Timeout(5*time.Second))
	_, errWrong := nats.Connect(st.NATS.ClientURL(), nats.UserInfo(bus.RoleReplica.User(), "not-the-password"), nats.Timeout(5*time.Second))
	observed = fmt.Sprintf("no credential: %v; wrong password: %v", errNone, errWrong)
	for _, err := range []error{errNone, errWrong} {
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("connect: %v, want an authorization violation", err)
		}
	}
}

func TestDebugUserWatchesAndCannotPublish(t *testing.T) {
	observed := ""
	record(t, privilege, "the debug user sees a view's request id and sealed reply inside the namespace; the server refuses its every publish (view, tool, status) and any subscription outside the namespace, and no replica receives what it sent", &observed)
	agent := "agent-privilege-debug"
	ss := liveSession(t, agent, stack.SessionOptions{})
	debug, errs := connectAs(t, bus.RoleDebug)
	seen := make(chan *nats.Msg, 64)
	sub, err := debug.ChanSubscribe(st.NS.Wildcard(), seen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := debug.Flush(); err != nil {
		t.Fatal(err)
	}
	if a := client.Poll(t, agent); a.Summary() != "200 frame" {
		t.Fatalf("view: %s", a.Summary())
	}
	var request, reply string
	for request == "" || reply == "" {
		select {
		case m := <-seen:
			switch {
			case strings.HasPrefix(m.Subject, st.NS.Prefix()+".view.") && envelope.ValidRequestID(string(m.Data)):
				request = m.Subject
			case strings.HasPrefix(m.Subject, st.NS.InboxPrefix(bus.RoleReplica)+".") && strings.HasPrefix(string(m.Data), `{"envelope":{`):
				reply = m.Subject
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the debug user saw request %q and reply %q", request, reply)
		}
	}

	// What the debug user publishes must reach no replica.
	got := make(chan *nats.Msg, 16)
	var subjects []string
	for _, verb := range []bus.Verb{bus.VerbView, bus.VerbTool, bus.VerbStatus} {
		subject, err := st.NS.Subject(verb, ss.ID)
		if err != nil {
			t.Fatal(err)
		}
		subjects = append(subjects, subject)
		s, err := st.Bus.ChanSubscribe(subject, got)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Unsubscribe() })
	}
	if err := st.Bus.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, subject := range subjects {
		if err := debug.Publish(subject, []byte(`{"status":"stopped"}`)); err != nil {
			t.Fatal(err)
		}
		violation(t, errs, subject)
	}
	if _, err := debug.Subscribe(">", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	violation(t, errs, `">"`)
	// A marker from a replica, published after the refusals, arrives after anything the
	// server would have routed before them.
	if err := st.Bus.Publish(subjects[2], []byte("marker")); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case m := <-got:
			if string(m.Data) == "marker" {
				observed = fmt.Sprintf("saw the request on %s… and the envelope on %s…; 3 publishes and a subscription to > refused; replicas received none of it",
					request[:len(st.NS.Prefix())+6], reply[:len(st.NS.InboxPrefix(bus.RoleReplica))+1])
				return
			}
			t.Fatalf("a replica received %q on %s from the debug user", m.Data, m.Subject)
		case <-time.After(5 * time.Second):
			t.Fatal("the marker did not arrive")
		}
	}
}

func TestOperatorUserMayOnlyCallTools(t *testing.T) {
	observed := ""
	record(t, privilege, "the operator user may publish tool requests and its admin changes' audit events and read its own replies, nothing else: view, status, view-audit and admin-API-audit publishes, the namespace and the replicas' inboxes are refused", &observed)
	op, errs := connectAs(t, bus.RoleOperator)
	view, err := st.NS.Subject(bus.VerbView, "s1")
	if err != nil {
		t.Fatal(err)
	}
	status, err := st.NS.Subject(bus.VerbStatus, "s1")
	if err != nil {
		t.Fatal(err)
	}
	// An event claiming the admin API's source, on its subjects: who published it is
	// the server's word, not the event's.
	forged, err := st.NS.AuditAdmin(bus.AuditSourceAPI, "adminkey.create")
	if err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{view, status, st.NS.AuditView("a1"), forged} {
		if err := op.Publish(subject, []byte(`{"source":"admin-api","adminKey":"0123456789abcdef","action":"adminkey.create"}`)); err != nil {
			t.Fatal(err)
		}
		violation(t, errs, subject)
	}
	for _, subject := range []string{st.NS.Wildcard(), st.NS.InboxPrefix(bus.RoleReplica) + ".>"} {
		if _, err := op.Subscribe(subject, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		violation(t, errs, subject)
	}
	observed = "4 publishes (an admin-API event among them) and 2 subscriptions refused by the server"
}

func TestAuditUserOnlyReadsTheAuditTrail(t *testing.T) {
	observed := ""
	record(t, privilege, "the audit user receives the audit events and reads the audit stream, nothing else: subscriptions to view and tool subjects, the namespace and >, its publishes (audit subjects included) and JetStream calls that change the stream are refused", &observed)
	reader, errs := connectAs(t, bus.RoleAudit)
	events := make(chan *nats.Msg, 4)
	sub, err := reader.ChanSubscribe(st.NS.AuditWildcard(), events)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := reader.Flush(); err != nil {
		t.Fatal(err)
	}
	// A replica's event reaches it.
	// Events of a boot of their own (the stream keeps them): whole sequences.
	subject := st.NS.AuditView("agent-privilege-audit")
	if err := st.Bus.Publish(subject, []byte(`{"outcome":"frame","replica":"privilege-test","boot":"00000000feedface","seq":1,"count":1}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-events:
		if m.Subject != subject {
			t.Fatalf("the audit user received %s", m.Subject)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the audit user did not receive the replica's audit event")
	}
	view, err := st.NS.Subject(bus.VerbView, "s1")
	if err != nil {
		t.Fatal(err)
	}
	refused := []string{view, st.NS.AllOf(bus.VerbTool), st.NS.Wildcard(), ">"}
	for _, s := range refused {
		if _, err := reader.Subscribe(s, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		violation(t, errs, s)
	}
	admin, err := st.NS.AuditAdmin(bus.AuditSourceAPI, "user.put")
	if err != nil {
		t.Fatal(err)
	}
	changes := []string{"$JS.API.STREAM.PURGE." + bus.AuditStream, "$JS.API.STREAM.DELETE." + bus.AuditStream, "$JS.API.STREAM.UPDATE." + bus.AuditStream, "$JS.API.STREAM.MSG.DELETE." + bus.AuditStream}
	for _, s := range append([]string{subject, admin, view}, changes...) {
		if err := reader.Publish(s, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		violation(t, errs, s)
	}
	// What it published reached no one: its own subscription saw nothing more.
	const marker = `{"outcome":"marker","replica":"privilege-test","boot":"00000000feedface","seq":2,"count":1}`
	if err := st.Bus.Publish(subject, []byte(marker)); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-events:
		if string(m.Data) != marker {
			t.Fatalf("the audit user's own publish was delivered: %q", m.Data)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the marker did not arrive")
	}
	observed = fmt.Sprintf("received the replica's event; %d subscriptions, 3 publishes and %d JetStream calls (purge, delete, update, message delete) refused by the server", len(refused), len(changes))
}

func TestRedisRefusesStrangersAndConfinesUsers(t *testing.T) {
	observed := ""
	record(t, privilege, "Redis without a credential answers NOAUTH; the operator and replica users cannot touch another deployment's keys, Pub/Sub, administrative commands or another database; the operator cannot touch a view's grant, gate or pace", &observed)
	c := client.Context(t)
	anon := redis.NewClient(&redis.Options{Addr: st.Redis.Addr(), MaxRetries: -1, DisableIdentity: true})
	t.Cleanup(func() { _ = anon.Close() })
	err := anon.Get(c, keyspace.For("dev").Session("x")).Err()
	if err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("GET without a credential: %v, want NOAUTH", err)
	}
	results := []string{"no credential: NOAUTH"}
	for _, user := range []string{deploy.RedisOperator, deploy.RedisReplica} {
		rdb := redis.NewUniversalClient(st.RedisOptions(user))
		t.Cleanup(func() { _ = rdb.Close() })
		if err := rdb.Ping(c).Err(); err != nil {
			t.Fatalf("%s: ping: %v", user, err)
		}
		cmds := [][]any{
			{"get", keyspace.For("other").Session("x")},
			{"set", keyspace.For("other").Gate("x"), "1"},
			{"hgetall", "cap:{r:x}"},
			{"keys", "*"},
			{"flushall"},
			{"config", "get", "*"},
			{"publish", "agentfy", "x"},
			{"acl", "list"},
			{"select", "1"}, // the deployment's database is 0
		}
		if user == deploy.RedisOperator {
			// A view's keys are the replicas' alone: the operator cannot redirect a
			// grant to a key of its own, nor open a gate or a pace early.
			k := keyspace.For("dev")
			cmds = append(cmds,
				[]any{"set", k.Grant("0123456789abcdef", strings.Repeat("ab", 32)), `{"sessionId":"s","publicKey":"x"}`, "xx", "keepttl"},
				[]any{"get", k.Grant("0123456789abcdef", strings.Repeat("ab", 32))},
				[]any{"del", k.Gate("agent-x")},
				[]any{"set", k.Gate("agent-x"), "1"},
				[]any{"del", k.Pace("agent-x", "someone")},
				[]any{"pttl", k.Pace("agent-x", "someone")},
			)
		}
		for _, cmd := range cmds {
			err := rdb.Do(c, cmd...).Err()
			if err == nil || !strings.Contains(err.Error(), "NOPERM") {
				t.Fatalf("%s: %v: %v, want NOPERM", user, cmd, err)
			}
		}
		if err := rdb.Do(c, "select", "0").Err(); err != nil {
			t.Fatalf("%s: SELECT of the deployment's own database: %v", user, err)
		}
		results = append(results, fmt.Sprintf("%s: %d of %d commands NOPERM", user, len(cmds), len(cmds)))
	}
	observed = strings.Join(results, "; ")
}

func TestForgedToolResultIsRefused(t *testing.T) {
	observed := ""
	record(t, privilege, "with a replica's NATS credential, an attacker answering a tool call first with a result sealed to its reply key (plainly, or from its own key) is refused by the requester", &observed)
	// A stand-in broker that answers browser_tabs only once the attacker has answered
	// (or after a second, when no attacker listens): the forgery always arrives first.
	attackerDone := make(chan struct{}, 4)
	broker := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/tools/browser_tabs" {
			http.Error(w, `{"error":{"code":"not_found","message":"no"}}`, http.StatusNotFound)
			return
		}
		select {
		case <-attackerDone:
		case <-time.After(time.Second):
		}
		_, _ = w.Write([]byte(`{"result":{"tabs":[]}}`))
	})
	agent := client.NewAgent(t, "agent-privilege-tool")
	ss := stacktest.StartSession(client.Context(t), t, st, agent, stack.SessionOptions{Replica: 1, BrokerHandler: broker})
	subject, err := st.NS.Subject(bus.VerbTool, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	attackerKey, err := envelope.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	forged := []byte(`{"tabs":[{"tabId":"forged","url":"https://evil.example/","title":"Forged"}]}`)
	var answered atomic.Int32
	for _, fromOwnKey := range []bool{false, true} {
		attacker, _ := connectAs(t, bus.RoleReplica)
		sub, err := attacker.Subscribe(subject, func(m *nats.Msg) {
			var req struct {
				RequestID string `json:"requestId"`
				ReplyKey  string `json:"replyKey"`
			}
			if json.Unmarshal(m.Data, &req) != nil {
				return
			}
			rk, err := envelope.ParsePublicKey(req.ReplyKey)
			if err != nil {
				return
			}
			var env envelope.Envelope
			if fromOwnKey {
				env, err = envelope.SealFrom(rand.Reader, attackerKey, rk, req.RequestID, forged)
			} else {
				env, err = envelope.Seal(rand.Reader, rk, req.RequestID, forged)
			}
			if err != nil {
				return
			}
			b, _ := json.Marshal(envelope.Sealed{Envelope: env})
			if m.Respond(b) == nil {
				answered.Add(1)
			}
			// On the wire before the stand-in broker lets the genuine answer go.
			_ = attacker.Flush()
			attackerDone <- struct{}{}
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := attacker.Flush(); err != nil {
			t.Fatal(err)
		}
		res, err := ss.Tool(client.Context(t), "browser_tabs", struct{}{})
		_ = sub.Unsubscribe()
		attacker.Close()
		if err == nil {
			t.Fatalf("a forged tool result was accepted: %s", res)
		}
		if !strings.Contains(err.Error(), "does not open") {
			t.Fatalf("tool call with an attacker answering first: %v", err)
		}
	}
	if answered.Load() != 2 {
		t.Fatalf("the attacker answered %d of 2 calls", answered.Load())
	}
	// Without the attacker the same call works: the refusal was the forgery's.
	res, err := ss.Tool(client.Context(t), "browser_tabs", struct{}{})
	if err != nil || string(res) != `{"tabs":[]}` {
		t.Fatalf("tool call without the attacker: %s, %v", res, err)
	}
	observed = "2 forged results (plain seal, seal from the attacker's key) answered first and refused; the genuine result accepted afterwards"
}

func TestForgedStatusEventsDoNotReachTheFeed(t *testing.T) {
	observed := ""
	record(t, privilege, `with a replica's NATS credential, a forged "stopped" for a live session and a forged "running" for a stopped one are checked against the session store and not relayed by any replica's status feed`, &observed)
	agent := client.NewAgent(t, "agent-privilege-status")
	ss := stacktest.StartSession(client.Context(t), t, st, agent, stack.SessionOptions{Replica: 1, Shell: true})
	c, cancel := context.WithCancel(client.Context(t))
	defer cancel()
	stream := stacktest.StatusStream(c, t, st.Replicas[0].URL, agent, client.Token(t, "u-alice"))
	if ev := next(t, stream); ev.Status != session.Running && ev.Status != session.Idle {
		t.Fatalf("first event %+v, want the live session", ev)
	}
	attacker, _ := connectAs(t, bus.RoleReplica)
	subject, err := st.NS.Subject(bus.VerbStatus, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	forge := func(status session.Status) {
		t.Helper()
		before := st.Replicas[0].Feed.Refused.Load()
		b, _ := json.Marshal(session.Event{AgentID: agent, SessionID: ss.ID, Status: status, At: time.Now()})
		if err := attacker.Publish(subject, b); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 5*time.Second, "the feed to refuse the forged event", func() bool { return st.Replicas[0].Feed.Refused.Load() > before })
		// Nothing was delivered after the refusal; a genuine event of the attach may
		// be queued, but never the forged status.
		for {
			select {
			case ev := <-stream:
				if ev.Status == status {
					t.Fatalf("the status feed relayed a forged event: %+v", ev)
				}
				continue
			default:
			}
			break
		}
	}
	forge(session.Stopped)
	if err := ss.Stop(client.Context(t)); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, stream); ev.Status != session.Stopped || ev.Live {
		t.Fatalf("after the real stop the feed said %+v", ev)
	}
	forge(session.Running)
	observed = `forged "stopped" refused while live; the real stop relayed; forged "running" refused after it`
}

func next(t *testing.T, stream <-chan stacktest.StatusEvent) stacktest.StatusEvent {
	t.Helper()
	select {
	case ev, ok := <-stream:
		if !ok {
			t.Fatal("the status stream ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no status event within 10 s")
	}
	return stacktest.StatusEvent{}
}

func TestViewFloodOnTheBusIsPacedAtTheOwner(t *testing.T) {
	observed := ""
	record(t, privilege, "with a replica's NATS credential, a flood of view requests with random ids never reaches the worker or the consume route and real views keep working; a flood of ids with a replica's proof reaches the broker at most at the paced rate (burst 3, then 1/s), requests relayed once and replayed are refused before the worker, and real views work again within 2 s after it stops", &observed)
	agent := "agent-privilege-flood"
	ss := liveSession(t, agent, stack.SessionOptions{})
	subject, err := st.NS.Subject(bus.VerbView, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	owner := st.Replicas[1].Hub
	var consumes atomic.Int32
	st.SetConsumeHook(func() { consumes.Add(1) })
	t.Cleanup(func() { st.SetConsumeHook(nil) })

	attacker, _ := connectAs(t, bus.RoleReplica)
	replies := make(chan *nats.Msg, 8192)
	inbox := nats.NewInbox()
	inbox = st.NS.InboxPrefix(bus.RoleReplica) + inbox[len("_INBOX"):]
	rsub, err := attacker.ChanSubscribe(inbox, replies)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rsub.Unsubscribe() })
	// flood sends a request of each id, with a replica's proof when proven.
	flood := func(ids []string, proven bool) {
		t.Helper()
		for _, id := range ids {
			msg := &nats.Msg{Subject: subject, Data: []byte(id)}
			if proven {
				var err error
				if msg, err = st.ViewRequest(ss.ID, id); err != nil {
					t.Fatal(err)
				}
			}
			msg.Reply = inbox
			if err := attacker.PublishMsg(msg); err != nil {
				t.Fatal(err)
			}
		}
		if err := attacker.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	codes := func(n int) map[string]int {
		t.Helper()
		out := map[string]int{}
		for range n {
			select {
			case m := <-replies:
				out[m.Header.Get(bus.HeaderErrorCode)]++
			case <-time.After(20 * time.Second):
				t.Fatalf("only %v of %d replies", out, n)
			}
		}
		return out
	}

	// Random ids: refused before the worker, while real views go on. They go in
	// batches the owner's subscription can hold (bus.PendingMsgsLimit), so that every
	// one is answered and counted; a faster flood only loses messages at the owner.
	const random, batch = 4000, 500
	relayedBefore := owner.ViewsRelayed.Load()
	during := make(chan stacktest.Response, 1)
	go func() { during <- client.Poll(t, agent) }()
	got := map[string]int{}
	ids := make([]string, batch)
	for range random / batch {
		for i := range ids {
			ids[i] = randomID(t)
		}
		flood(ids, false)
		for code, n := range codes(batch) {
			got[code] += n
		}
	}
	real := <-during
	if got[wire.ReasonRefused] != random || consumes.Load() != 1 || owner.ViewsRelayed.Load()-relayedBefore != 1 || real.Summary() != "200 frame" {
		t.Fatalf("random flood: replies %v, %d consumes and %d relays (want the one real view's), real view %s",
			got, consumes.Load(), owner.ViewsRelayed.Load()-relayedBefore, real.Summary())
	}

	// Ids with a replica's proof (a compromised replica, holding the grant key, could
	// make them): paced.
	const valid = 40
	ids = make([]string, valid)
	for i := range ids {
		ids[i] = randomID(t)
	}
	relayedBefore = owner.ViewsRelayed.Load()
	pacedBefore := owner.ViewsPaced.Load()
	start := time.Now()
	flood(ids, true)
	got = codes(valid)
	elapsed := time.Since(start)
	relayed := int(owner.ViewsRelayed.Load() - relayedBefore)
	paced := int(owner.ViewsPaced.Load() - pacedBefore)
	limit := 3 + int(elapsed.Seconds()) + 1
	if relayed > limit || relayed+paced != valid || got[wire.ReasonBusy] < paced {
		t.Fatalf("valid flood of %d in %v: %d reached the broker (limit %d), replies %v", valid, elapsed, relayed, limit, got)
	}
	// Replays: requests relayed once, sent again as someone who recorded them on the
	// bus would (the same ids and proofs) while the proofs are fresh, are refused
	// before the worker and take none of the pace.
	if err := st.OpenGateFor(client.Context(t), agent, "nobody"); err != nil { // refills the relay pace
		t.Fatal(err)
	}
	recorded := make([]*nats.Msg, channel.RelayBurst)
	for i := range recorded {
		msg, err := st.ViewRequest(ss.ID, randomID(t))
		if err != nil {
			t.Fatal(err)
		}
		recorded[i] = msg
	}
	send := func() map[string]int {
		for _, msg := range recorded {
			msg.Reply = inbox
			if err := attacker.PublishMsg(msg); err != nil {
				t.Fatal(err)
			}
		}
		if err := attacker.Flush(); err != nil {
			t.Fatal(err)
		}
		return codes(len(recorded))
	}
	relayedBefore = owner.ViewsRelayed.Load()
	send()
	once := owner.ViewsRelayed.Load() - relayedBefore
	relayedBefore, pacedBefore = owner.ViewsRelayed.Load(), owner.ViewsPaced.Load()
	replayed := send()
	if once != int64(len(recorded)) || replayed[wire.ReasonRefused] != len(recorded) ||
		owner.ViewsRelayed.Load() != relayedBefore || owner.ViewsPaced.Load() != pacedBefore {
		t.Fatalf("%d requests relayed %d times; replayed: replies %v, %d relayed, %d paced", len(recorded), once,
			replayed, owner.ViewsRelayed.Load()-relayedBefore, owner.ViewsPaced.Load()-pacedBefore)
	}
	// After the flood a client whose gate window is over asks again (the pace is left
	// as the flood left it). The floor is the broker's own 2-s spacing after the
	// flood's last capture (SPEC §3.8), which no pace can shorten; the pace adds nothing
	// to it.
	end := time.Now()
	var first time.Duration
	testenv.WaitFor(t, 10*time.Second, "a frame after the flood", func() bool {
		_ = st.AdminClient().Del(client.Context(t), keyspace.For(st.NS.Deployment()).Gate(agent)).Err()
		r := client.Do(t, http.MethodGet, client.ViewURL(0, agent), client.Token(t, "u-alice"), nil)
		if r.Summary() != "200 frame" {
			return false
		}
		// When the broker took it, not when the answer arrived: a loaded machine delays
		// the answer, not the spacing.
		captured, err := time.Parse("2006-01-02T15:04:05.000Z", r.Result(t).Page.CapturedAt)
		if err != nil {
			t.Fatal(err)
		}
		first = captured.Sub(end.Truncate(time.Millisecond))
		return true
	})
	if first > 2*time.Second+afterSpacing {
		t.Fatalf("first frame %v after the flood, want within 2 s of the broker's last capture", first)
	}
	observed = fmt.Sprintf("%d random ids: all refused, 0 reached the worker or the consume route, a real view during the flood 200 frame; %d ids with a replica's proof in %v: %d relayed to the worker, %d answered busy at once by the pace; %d relayed requests replayed: all refused, none relayed or paced; a frame %v after the flood (the broker's 2-s capture spacing after the flood's last capture)",
		random, valid, elapsed.Round(time.Millisecond), relayed, paced, len(recorded), first.Round(time.Millisecond))
}

func attackerKey(t *testing.T) *ecdh.PrivateKey {
	t.Helper()
	k, err := envelope.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// afterSpacing is what may pass beyond the broker's capture spacing before the next
// capture starts: the request's trip from the client to the broker (a loaded machine's
// scheduling included). The answer's trip back is not counted: the frame's capturedAt is.
const afterSpacing = 500 * time.Millisecond

func randomID(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func TestWorkerAndBrokerHaveNoStoreOrBusSetting(t *testing.T) {
	observed := ""
	record(t, privilege, "the worker and broker binaries link no NATS or Redis client, and a broker process's environment holds no NATS, Redis or JWT setting nor any role's password", &observed)
	root, err := stack.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{"./cmd/agentfy-worker", "./cmd/agentfy-broker"} {
		cmd := exec.CommandContext(client.Context(t), "go", "list", "-deps", bin)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", bin, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/nats-io/") || strings.HasPrefix(dep, "github.com/redis/") {
				t.Fatalf("%s depends on %s", bin, dep)
			}
		}
	}
	ss := liveSession(t, "agent-privilege-env", stack.SessionOptions{BrokerProcess: true})
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", ss.BrokerPID()))
	if err != nil {
		t.Fatal(err)
	}
	vars := strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00")
	for _, kv := range vars {
		name, value, _ := strings.Cut(kv, "=")
		if strings.Contains(name, "NATS") || strings.Contains(name, "REDIS") || strings.Contains(name, "JWT") {
			t.Fatalf("the broker's environment has %s", name)
		}
		for _, pw := range st.Secrets.NATS {
			if strings.Contains(value, pw) {
				t.Fatalf("the broker's %s holds a NATS password", name)
			}
		}
		for _, pw := range st.Secrets.Redis {
			if strings.Contains(value, pw) {
				t.Fatalf("the broker's %s holds a Redis password", name)
			}
		}
	}
	observed = fmt.Sprintf("neither binary depends on nats.go or go-redis; the broker process's %d variables hold no such setting", len(vars))
}
