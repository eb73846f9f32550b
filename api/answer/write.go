package answer

import (
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// Recovery answers a handler's panic 500 internal, in the one error body.
func Recovery() gin.HandlerFunc {
	return gin.CustomRecovery(func(c *gin.Context, _ any) {
		c.AbortWithStatusJSON(Panic.Status, Panic.Body())
	})
}

// Unrouted makes eng answer a method a route does not take with 405 method_not_allowed
// and a path it has no route for with notFound, both in the one error body: the admin
// and metrics listeners' rule.
func Unrouted(eng *gin.Engine, notFound Error) {
	eng.NoMethod(func(c *gin.Context) {
		CloseIfBody(c)
		c.AbortWithStatusJSON(MethodNotAllowed.Status, MethodNotAllowed.Body())
	})
	eng.NoRoute(func(c *gin.Context) {
		CloseIfBody(c)
		c.AbortWithStatusJSON(notFound.Status, notFound.Body())
	})
}

// CloseIfBody ends the connection after an error answer to a request that carries a
// body: net/http would otherwise read (drain) up to 256 KiB of what is left of it once
// the handler returns, and a client that sends it one byte at a time — an
// unauthenticated one too — would hold the connection until the read deadline. The
// read deadline set to now makes that drain fail at once; refused bodies are never
// read.
func CloseIfBody(c *gin.Context) {
	if c.Request.ContentLength != 0 || len(c.Request.TransferEncoding) > 0 {
		c.Header("Connection", "close")
		_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now())
	}
}

// NoStore marks every response of the routes it is a handler of, errors included, as
// not to be stored by any cache (SetNoStore). A listener's answers outside its routes
// (an unknown path, a method a route does not take) get them only when NoStore is one
// of the router's own handlers (gin's Use) or NoRoute and NoMethod call SetNoStore.
func NoStore(c *gin.Context) {
	SetNoStore(c)
	c.Next()
}

// SetNoStore sets the headers of NoStore on c's response: Cache-Control: no-store, and
// X-Content-Type-Options: nosniff.
func SetNoStore(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	c.Header("X-Content-Type-Options", "nosniff")
}

// RefuseAmbiguous answers 400, with no-store and the error body, a request that one
// reader could take one way and another reader another, before any route's handler
// runs (it is registered where each listener's router is built):
//
//   - more than one Authorization header. The handlers read the first (gin's
//     GetHeader, net/http's Header.Get); a proxy or log in front may read another, so
//     which credential was checked would depend on who asks.
//   - an encoded slash (%2F, any case) in the path. The router matches the decoded
//     path, so /v1/admin/teams/t1%2Fmembers would reach the route of t1's member list
//     and /v1/agents/a%2Fworker%2Fview an agent's view. No id contains '/'.
func RefuseAmbiguous(c *gin.Context) {
	switch {
	case len(c.Request.Header.Values("Authorization")) > 1:
		refuse(c, errTwoCredentials)
	case strings.Contains(strings.ToLower(c.Request.URL.EscapedPath()), "%2f"):
		refuse(c, errEncodedSlash)
	default:
		c.Next()
	}
}

// refuse answers e with no-store, whatever the route, and ends the request.
func refuse(c *gin.Context, e Error) {
	SetNoStore(c)
	CloseIfBody(c)
	c.AbortWithStatusJSON(e.Status, e.Body())
}
