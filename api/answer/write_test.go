package answer

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/agentfy/agentfy/wire"
)

// CloseIfBody ends the connection after an error answer only when the request has a
// body left to drain.
func TestCloseIfBody(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	tests := []struct {
		name      string
		body      string
		chunked   bool
		wantClose bool
	}{
		{"no body", "", false, false},
		{"body", `{"requestId":"x"}`, false, true},
		{"chunked body", `{"requestId":"x"}`, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(w)
			c.Request = httptest.NewRequest(http.MethodPost, wire.ConsumePath, strings.NewReader(tt.body))
			if tt.chunked {
				c.Request.ContentLength = -1
				c.Request.TransferEncoding = []string{"chunked"}
			}
			CloseIfBody(c)
			if got := w.Header().Get("Connection") == "close"; got != tt.wantClose {
				t.Fatalf("Connection: close = %v, want %v", got, tt.wantClose)
			}
		})
	}
}
