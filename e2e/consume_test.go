package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

// The consume route's happy path on the stack: the session's broker redeems a view
// grant once, through the load balancer, and gets the requester's public key. Its
// table of refusals is api's TestConsumeRoute; the attacks on it are reliability's.
func TestConsumeRoute(t *testing.T) {
	c := client.Context(t)
	sess, passes, err := st.Sess.Start(c, client.NewAgent(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	key := "04" + strings.Repeat("ab", 64)
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	if err := view.NewGrants(st.Replicas[1].Redis, "dev", st.GrantKeys, 0).Put(c, id, sess.ID, sess.BrokerPassID, key); err != nil {
		t.Fatal(err)
	}
	r := client.Do(t, http.MethodPost, st.LB+wire.ConsumePath, passes.Broker, strings.NewReader(stacktest.ConsumeRequest(id)))
	var ok struct{ PublicKey string }
	if r.Status != http.StatusOK || json.Unmarshal([]byte(r.Body), &ok) != nil || ok.PublicKey != key {
		t.Fatalf("consume: %d %s", r.Status, r.Body)
	}
}
