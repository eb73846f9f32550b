package api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

// FuzzConsumeBody feeds request bodies to the consume route's strict decoder: it must
// never panic, accept only one JSON object with exactly the requestId field, and answer
// 400 (or 415) for everything else.
func FuzzConsumeBody(f *testing.F) {
	f.Add([]byte(`{"requestId":"0000000000000000000000000000000000000000000000000000000000000000"}`))
	f.Add([]byte(`{"requestId":"x","publicKey":"04"}`))
	f.Add([]byte(`{"requestId":"a"} {"requestId":"b"}`))
	f.Add([]byte(`[]`))
	gin.SetMode(gin.ReleaseMode)
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		c.Request = httptest.NewRequest(http.MethodPost, "/v1/internal/worker-observations/consume", bytes.NewReader(body))
		c.Request.Header.Set("Content-Type", "application/json")
		var req struct {
			RequestID string `json:"requestId"`
		}
		ok := decodeStrict(c, MaxConsumeBody, &req)
		if ok && (w.Code != http.StatusOK || len(body) > MaxConsumeBody) {
			t.Fatalf("accepted %q but wrote %d", body, w.Code)
		}
		if !ok && w.Code != http.StatusBadRequest {
			t.Fatalf("refused %q with %d, want 400", body, w.Code)
		}
	})
}
