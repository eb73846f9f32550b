package reliability

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/stacktest"
)

func TestAccess(t *testing.T) {
	c := client.Context(t)
	agent := client.NewAgent(t, "agent-access")
	_, passes, err := st.Sess.Start(c, agent)
	if err != nil {
		t.Fatal(err)
	}
	claims := func(exp time.Time, sub string) jwt.MapClaims {
		return jwt.MapClaims{"iss": "agentfy-dev", "aud": "agentfy-api", "sub": sub, "exp": exp.Unix(), "iat": time.Now().Unix()}
	}
	sign := func(m jwt.SigningMethod, key any, cl jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(m, cl).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	expired := sign(jwt.SigningMethodHS256, st.Secret, claims(time.Now().Add(-time.Minute), "u-alice"))
	badSig := sign(jwt.SigningMethodHS256, []byte("another-secret-of-thirty-two-bytes!!"), claims(time.Now().Add(time.Hour), "u-alice"))
	none := sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(time.Now().Add(time.Hour), "u-alice"))
	es256 := sign(jwt.SigningMethodES256, ecKey, claims(time.Now().Add(time.Hour), "u-alice"))
	otherTeam := client.Token(t, "u-carol")
	otherOrg, _, _ := st.Creds.CreateOrgKey(c, "org-globex", "production", []string{auth.ScopeWorkerLogsRead})
	otherEnv, _, _ := st.Creds.CreateOrgKey(c, "org-acme", "staging", []string{auth.ScopeWorkerLogsRead})
	noScope, _, _ := st.Creds.CreateOrgKey(c, "org-acme", "production", nil)

	human := func(r int) string { return client.ViewURL(r, agent) }
	partner := func(org string) string { return client.PartnerViewURL(0, org, agent) }
	consumeURL := st.Replicas[0].URL + "/v1/internal/worker-observations/consume"
	unknown := client.Do(t, http.MethodGet, client.ViewURL(0, "agent-nobody"), client.Token(t, "u-alice"), nil)

	cases := []struct {
		name, method, url, bearer string
		want                      int
		same404                   bool
	}{
		{"view_no_credential", http.MethodGet, human(0), "", http.StatusUnauthorized, false},
		{"view_expired_JWT", http.MethodGet, human(1), expired, http.StatusUnauthorized, false},
		{"view_JWT_with_a_bad_signature", http.MethodGet, human(0), badSig, http.StatusUnauthorized, false},
		{"view_JWT_with_alg_none", http.MethodGet, human(1), none, http.StatusUnauthorized, false},
		{"view_JWT_with_another_algorithm", http.MethodGet, human(0), es256, http.StatusUnauthorized, false},
		{"view_another_team's_JWT", http.MethodGet, human(1), otherTeam, http.StatusNotFound, true},
		{"partner_no_credential", http.MethodGet, partner("org-acme"), "", http.StatusUnauthorized, false},
		{"partner_key_of_another_organisation", http.MethodGet, partner("org-globex"), otherOrg, http.StatusNotFound, true},
		{"partner_key_of_another_organisation_on_ours", http.MethodGet, partner("org-acme"), otherOrg, http.StatusNotFound, true},
		{"partner_key_of_another_environment", http.MethodGet, partner("org-acme"), otherEnv, http.StatusNotFound, true},
		{"partner_key_without_the_scope", http.MethodGet, partner("org-acme"), noScope, http.StatusForbidden, false},
		{"partner_human_JWT", http.MethodGet, partner("org-acme"), client.Token(t, "u-alice"), http.StatusUnauthorized, false},
		{"status_feed_no_credential", http.MethodGet, st.Replicas[0].URL + stacktest.StatusPath(agent), "", http.StatusUnauthorized, false},
		{"status_feed_another_team", http.MethodGet, st.Replicas[0].URL + stacktest.StatusPath(agent), otherTeam, http.StatusNotFound, true},
		{"consume_no_credential", http.MethodPost, consumeURL, "", http.StatusUnauthorized, false},
		{"consume_worker_pass", http.MethodPost, consumeURL, passes.Worker, http.StatusForbidden, false},
		{"consume_organisation_key", http.MethodPost, consumeURL, noScope, http.StatusForbidden, false},
		{"worker_channel_broker_pass", http.MethodGet, st.Replicas[0].URL + "/v1/worker/channel", passes.Broker, http.StatusForbidden, false},
		{"worker_channel_no_credential", http.MethodGet, st.Replicas[0].URL + "/v1/worker/channel", "", http.StatusUnauthorized, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			observed := ""
			expected := fmt.Sprint(tc.want)
			if tc.same404 {
				expected += ", the unknown agent's body"
			}
			record(t, "Access (Cache-Control: no-store on every answer)", expected, &observed)
			var a stacktest.Response
			if tc.method == http.MethodPost {
				a = client.Do(t, tc.method, tc.url, tc.bearer, stringsReader(`{"requestId":"`+fmt.Sprintf("%064x", 1)+`"}`))
			} else {
				a = client.Do(t, tc.method, tc.url, tc.bearer, nil)
			}
			observed = fmt.Sprint(a.Status)
			if tc.same404 && a.Status == http.StatusNotFound {
				if a.Body == unknown.Body {
					observed += ", the unknown agent's body"
				} else {
					observed += ", a different body"
				}
			}
			if a.Status != tc.want || (tc.same404 && a.Body != unknown.Body) {
				t.Errorf("got %s", observed)
			}
		})
	}
}
