package reliability

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/keyspace"
	"github.com/agentfy/agentfy/view"
)

func TestGrants(t *testing.T) {
	c := client.Context(t)
	agent, other := client.NewAgent(t, "agent-cap"), client.NewAgent(t, "agent-cap-other")
	sess, passes, err := st.Sess.Start(c, agent)
	if err != nil {
		t.Fatal(err)
	}
	_, otherPasses, err := st.Sess.Start(c, other)
	if err != nil {
		t.Fatal(err)
	}
	features := view.NewGrants(st.Replicas[0].Redis, "dev", st.GrantKeys, 0)
	const key = "04" + "11223344556677889900aabbccddeeff11223344556677889900aabbccddeeff" + "11223344556677889900aabbccddeeff11223344556677889900aabbccddeeff"
	newCap := func() string {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		id := hex.EncodeToString(b)
		if err := features.Put(c, id, sess.ID, sess.BrokerPassID, key); err != nil {
			t.Fatal(err)
		}
		return id
	}
	legit := func(t *testing.T, id string) string {
		a := client.Consume(t, passes.Broker, stacktest.ConsumeRequest(id))
		var body struct{ PublicKey string }
		if a.Status != http.StatusOK || json.Unmarshal([]byte(a.Body), &body) != nil || body.PublicKey != key {
			t.Errorf("the legitimate broker could not consume afterwards: %d", a.Status)
			return fmt.Sprint(a.Status)
		}
		return "200 with the key"
	}
	unknown := client.Consume(t, passes.Broker, stacktest.ConsumeRequest(strings.Repeat("ab", 32))).Body

	t.Run("replay", func(t *testing.T) {
		observed := ""
		record(t, "Grants", "first consume 200, the replay 404 (same body as unknown)", &observed)
		id := newCap()
		first := legit(t, id)
		second := client.Consume(t, passes.Broker, stacktest.ConsumeRequest(id))
		observed = first + "; replay " + fmt.Sprint(second.Status)
		if second.Status != http.StatusNotFound || second.Body != unknown {
			t.Errorf("replay: %d", second.Status)
		}
	})
	t.Run("expiry", func(t *testing.T) {
		observed := ""
		record(t, "Grants", "404 once Redis expired the key (lifetime shortened to 50 ms)", &observed)
		// A grant stored with a 50-ms lifetime, by the same code with a shorter TTL.
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		id := hex.EncodeToString(b)
		if err := view.NewGrants(st.Replicas[0].Redis, "dev", st.GrantKeys, 50*time.Millisecond).Put(c, id, sess.ID, sess.BrokerPassID, key); err != nil {
			t.Fatal(err)
		}
		keyName := keyspace.For(st.NS.Deployment()).Grant(sess.BrokerPassID, id)
		testenv.WaitFor(t, 5*time.Second, "expiry", func() bool { n, _ := st.AdminClient().Exists(c, keyName).Result(); return n == 0 })
		a := client.Consume(t, passes.Broker, stacktest.ConsumeRequest(id))
		observed = fmt.Sprint(a.Status)
		if a.Status != http.StatusNotFound || a.Body != unknown {
			t.Errorf("expired: %d", a.Status)
		}
	})
	for _, tc := range []struct {
		name, bearer string
		want         int
	}{
		{"another_session's_broker_pass", otherPasses.Broker, http.StatusNotFound},
		{"the_session's_worker_pass", passes.Worker, http.StatusForbidden},
		{"a_human_JWT", client.Token(t, "u-alice"), http.StatusForbidden},
		{"no_credential", "", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			observed := ""
			record(t, "Grants", fmt.Sprintf("%d, and the grant stays usable", tc.want), &observed)
			id := newCap()
			a := client.Consume(t, tc.bearer, stacktest.ConsumeRequest(id))
			observed = fmt.Sprint(a.Status) + "; then the legitimate broker: " + legit(t, id)
			if a.Status != tc.want || (tc.want == http.StatusNotFound && a.Body != unknown) {
				t.Errorf("got %d", a.Status)
			}
		})
	}
	t.Run("forged_request_id", func(t *testing.T) {
		observed := ""
		record(t, "Grants", "404 for a well-formed unknown id and for a malformed one", &observed)
		forged := client.Consume(t, passes.Broker, stacktest.ConsumeRequest(strings.Repeat("0", 64)))
		bad := client.Consume(t, passes.Broker, stacktest.ConsumeRequest("not-an-id"))
		observed = fmt.Sprintf("%d, %d", forged.Status, bad.Status)
		if forged.Status != http.StatusNotFound || bad.Status != http.StatusNotFound || forged.Body != unknown || bad.Body != unknown {
			t.Errorf("got %s", observed)
		}
	})
	t.Run("redirected_by_a_Redis_writer", func(t *testing.T) {
		observed := ""
		record(t, "Grants", "a grant rewritten in Redis by someone who is not a replica (SET XX KEEPTTL with the attacker's public key, the MAC kept) between the request and the consume: 404 with the unknown body, never the attacker's key; a warning with reason forged_capability and agentfy_capability_forged_total +1", &observed)
		before := metricValue(t, "agentfy_capability_forged_total", 0)
		id := newCap()
		k := keyspace.For("dev").Grant(sess.BrokerPassID, id)
		var stored map[string]string
		if err := json.Unmarshal([]byte(st.AdminClient().Get(c, k).Val()), &stored); err != nil {
			t.Fatal(err)
		}
		stored["publicKey"] = envelope.PublicKeyHex(attackerKey(t))
		forged, _ := json.Marshal(stored)
		if err := st.AdminClient().SetArgs(c, k, forged, redis.SetArgs{Mode: "XX", KeepTTL: true}).Err(); err != nil {
			t.Fatal(err)
		}
		logged := logs.String()
		a := client.Consume(t, passes.Broker, stacktest.ConsumeRequest(id))
		warned := strings.Contains(strings.TrimPrefix(logs.String(), logged), `"reason":"forged_capability"`)
		after := metricValue(t, "agentfy_capability_forged_total", 0)
		observed = fmt.Sprintf("%d (unknown body %t); warned %t; counter +%g", a.Status, a.Body == unknown, warned, after-before)
		if a.Status != http.StatusNotFound || a.Body != unknown || strings.Contains(a.Body, stored["publicKey"]) || !warned || after-before != 1 {
			t.Errorf("got %s", observed)
		}
	})
}

// TestGrantRedirectedInTheRace is the race a Redis writer ran against a live view:
// between the owner's check of the request and the broker's consume, it rewrites the
// grant with its own public key (SET XX KEEPTTL, the MAC kept). The consume route
// refuses it: the viewer gets 503, no page is sealed to the attacker's key, the
// replica says why in its log and its metric; the next view is a frame.
func TestGrantRedirectedInTheRace(t *testing.T) {
	observed := ""
	record(t, "Grants", "the grant rewritten in Redis with the attacker's key after the owner's check, before the broker's consume: the view is 503, nothing is sealed to the attacker, a warning with reason forged_capability and agentfy_capability_forged_total +1; the next view is a frame", &observed)
	agent := "agent-cap-race"
	liveSession(t, agent, stack.SessionOptions{})
	c := client.Context(t)
	attacker := envelope.PublicKeyHex(attackerKey(t))
	forgedCount := func() float64 {
		return metricValue(t, "agentfy_capability_forged_total", 0) + metricValue(t, "agentfy_capability_forged_total", 1)
	}
	before := forgedCount()
	rewrote := make(chan error, 1)
	owner := st.Replicas[1]
	owner.SetHooks(&stack.Hooks{OnRelay: func(_, k string) {
		var stored map[string]string
		err := json.Unmarshal([]byte(st.AdminClient().Get(c, k).Val()), &stored)
		if err == nil {
			stored["publicKey"] = attacker
			b, _ := json.Marshal(stored)
			err = st.AdminClient().SetArgs(c, k, b, redis.SetArgs{Mode: "XX", KeepTTL: true}).Err()
		}
		select {
		case rewrote <- err:
		default:
		}
	}})
	t.Cleanup(func() { owner.SetHooks(nil) })
	logged := len(logs.String())
	during := client.Poll(t, agent)
	owner.SetHooks(nil)
	select {
	case err := <-rewrote:
		if err != nil {
			t.Fatalf("rewrite the grant: %v", err)
		}
	default:
		t.Fatal("the view never reached the owner's relay")
	}
	warned := strings.Contains(logs.String()[logged:], `"reason":"forged_capability"`)
	grew := forgedCount() - before
	after := client.Poll(t, agent)
	observed = fmt.Sprintf("during: %s; warned %t; counter +%g; after: %s", during.Summary(), warned, grew, after.Summary())
	if during.Status != http.StatusServiceUnavailable || !warned || grew != 1 || after.Summary() != "200 frame" {
		t.Errorf("got %s", observed)
	}
}
