package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/agentfy/agentfy/wire"
)

// TestDecodeStrictRefusesAmbiguousMembers: the consume route's body (the broker's) is
// read by wire.DecodeStrict — a requestId given twice or in another case is refused, as
// encoding/json would have taken the last of two, or "RequestID" for "requestId".
func TestDecodeStrictRefusesAmbiguousMembers(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	id := strings.Repeat("a", 64)
	tests := []struct {
		name    string
		body    string
		wantErr bool
	}{
		{name: "exact", body: `{"requestId":"` + id + `"}`},
		{name: "duplicate", body: `{"requestId":"` + id + `","requestId":"` + id + `"}`, wantErr: true},
		{name: "case variant", body: `{"RequestId":"` + id + `"}`, wantErr: true},
		{name: "case variant beside the field", body: `{"requestId":"` + id + `","requestID":"b"}`, wantErr: true},
		{name: "invalid UTF-8", body: "{\"requestId\":\"\xff\"}", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(w)
			c.Request = httptest.NewRequest(http.MethodPost, wire.ConsumePath, strings.NewReader(tt.body))
			c.Request.Header.Set("Content-Type", "application/json")
			var req struct {
				RequestID string `json:"requestId"`
			}
			ok := decodeStrict(c, MaxConsumeBody, &req)
			if ok == tt.wantErr {
				t.Fatalf("decodeStrict(%s) = %v, want %v", tt.body, ok, !tt.wantErr)
			}
			if tt.wantErr && w.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400", w.Code)
			}
		})
	}
}
