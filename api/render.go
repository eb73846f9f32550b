package api

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// decodeStrict reads one JSON object of at most limit bytes with no unknown fields and
// nothing after it; otherwise it answers 400 and returns false.
func decodeStrict(c *gin.Context, limit int64, v any) bool {
	if ct := c.ContentType(); ct != "" && !strings.EqualFold(ct, "application/json") {
		closeIfBody(c) // the body is never read
		c.AbortWithStatusJSON(http.StatusUnsupportedMediaType, httpError{http.StatusUnsupportedMediaType, "unsupported_media_type", "send application/json"}.body())
		return false
	}
	body := http.MaxBytesReader(c.Writer, c.Request.Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		closeIfBody(c) // what is left of it is never read
		c.AbortWithStatusJSON(errBadRequest.status, errBadRequest.body())
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		closeIfBody(c)
		c.AbortWithStatusJSON(errBadRequest.status, errBadRequest.body())
		return false
	}
	return true
}
