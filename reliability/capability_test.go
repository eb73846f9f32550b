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

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/stacktest"
	"github.com/agentfy/agentfy/internal/testenv"
	"github.com/agentfy/agentfy/view"
)

func TestCapabilities(t *testing.T) {
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
	caps := view.NewCapabilities(st.Client, "dev", 0)
	const key = "04" + "11223344556677889900aabbccddeeff11223344556677889900aabbccddeeff" + "11223344556677889900aabbccddeeff11223344556677889900aabbccddeeff"
	newCap := func() string {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		id := hex.EncodeToString(b)
		if err := caps.Put(c, id, sess.ID, key); err != nil {
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
		record(t, "Capabilities", "first consume 200, the replay 404 (same body as unknown)", &observed)
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
		record(t, "Capabilities", "404 once Redis expired the key (lifetime shortened to 50 ms)", &observed)
		// A capability stored with a 50-ms lifetime, by the same code with a shorter TTL.
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		id := hex.EncodeToString(b)
		if err := view.NewCapabilities(st.Client, "dev", 50*time.Millisecond).Put(c, id, sess.ID, key); err != nil {
			t.Fatal(err)
		}
		keyName := bus.KeysFor(st.NS.Deployment()).Capability(id)
		testenv.WaitFor(t, 5*time.Second, "expiry", func() bool { n, _ := st.Client.Exists(c, keyName).Result(); return n == 0 })
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
			record(t, "Capabilities", fmt.Sprintf("%d, and the capability stays usable", tc.want), &observed)
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
		record(t, "Capabilities", "404 for a well-formed unknown id and for a malformed one", &observed)
		forged := client.Consume(t, passes.Broker, stacktest.ConsumeRequest(strings.Repeat("0", 64)))
		bad := client.Consume(t, passes.Broker, stacktest.ConsumeRequest("not-an-id"))
		observed = fmt.Sprintf("%d, %d", forged.Status, bad.Status)
		if forged.Status != http.StatusNotFound || bad.Status != http.StatusNotFound || forged.Body != unknown || bad.Body != unknown {
			t.Errorf("got %s", observed)
		}
	})
}
