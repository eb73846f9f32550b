package api

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/agentfy/agentfy/api/answer"
	"github.com/agentfy/agentfy/wire"
)

// decodeStrict reads one JSON object of at most limit bytes with wire.DecodeStrict (no
// unknown member, none twice, names in their exact case, nothing after it); otherwise
// it answers 400 (415 for another media type) and returns false.
func decodeStrict(c *gin.Context, limit int64, v any) bool {
	if refusal := readStrict(c, limit, v); refusal != nil {
		c.AbortWithStatusJSON(refusal.Status, refusal.Body())
		return false
	}
	return true
}

// readStrict is decodeStrict without the answer: the refusal it would give, or nil. A
// body it refuses is closed, unread past what was read.
func readStrict(c *gin.Context, limit int64, v any) *answer.Error {
	if ct := c.ContentType(); ct != "" && !strings.EqualFold(ct, "application/json") {
		answer.CloseIfBody(c) // the body is never read
		return &answer.UnsupportedMediaType
	}
	b, err := wire.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, limit))
	if err == nil {
		err = wire.DecodeStrict(b, v)
	}
	if err != nil {
		answer.CloseIfBody(c) // what is left of it (past the limit) is never read
		return &answer.BadRequest
	}
	return nil
}
