package api

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/agentfy/agentfy/wire"
)

// decodeStrict reads one JSON object of at most limit bytes with wire.DecodeStrict (no
// unknown member, none twice, names in their exact case, nothing after it); otherwise
// it answers 400 and returns false.
func decodeStrict(c *gin.Context, limit int64, v any) bool {
	if ct := c.ContentType(); ct != "" && !strings.EqualFold(ct, "application/json") {
		closeIfBody(c) // the body is never read
		c.AbortWithStatusJSON(errMediaType.status, errMediaType.body())
		return false
	}
	b, err := wire.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, limit))
	if err == nil {
		err = wire.DecodeStrict(b, v)
	}
	if err != nil {
		closeIfBody(c) // what is left of it (past the limit) is never read
		c.AbortWithStatusJSON(errBadRequest.status, errBadRequest.body())
		return false
	}
	return true
}
