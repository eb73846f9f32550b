package broker

import (
	"errors"
	"net/http"
	"testing"

	"github.com/agentfy/agentfy/wire"
)

// The broker's side of the failure table: an error whose code is a view's failure
// reason is answered with the table's status for it, and every reason the table gives
// the broker a status for is raised by one of its errors (a row without one fails).
func TestStatusOfReasons(t *testing.T) {
	raised := map[string]bool{}
	for _, e := range append(errorTable, struct {
		err error
		apiError
	}{errors.New("cdp: secret detail"), internalError}) {
		got := statusOf(e.err)
		if got != e.apiError {
			t.Errorf("statusOf(%v) = %+v, want its row %+v", e.err, got, e.apiError)
		}
		if wire.IsReason(got.code) {
			raised[got.code] = true
			if got.status != wire.BrokerStatus(got.code) {
				t.Errorf("%v is answered %d %s, the failure table says %d", e.err, got.status, got.code, wire.BrokerStatus(got.code))
			}
		}
	}
	for _, r := range wire.Reasons() {
		if wire.BrokerStatus(r) != http.StatusInternalServerError && !raised[r] {
			t.Errorf("the failure table gives the broker status %d for %s, and no broker error raises it", wire.BrokerStatus(r), r)
		}
	}
	if !raised[wire.ReasonBrokerError] {
		t.Errorf("no broker error is %s", wire.ReasonBrokerError)
	}
}
