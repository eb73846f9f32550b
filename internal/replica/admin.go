package replica

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"

	"github.com/agentfy/agentfy/api/admin"
	"github.com/agentfy/agentfy/openapi"
)

// MaxAdminConnections bounds the admin listener's connections: it serves a platform's
// sync job and operators, not the public.
const MaxAdminConnections = 64

// ServeAdmin serves the admin API (admin.Server) on ln, a listener of its own, until
// ctx ends. Its requests are bounded like the public ones: headers in HeaderTimeout, a
// whole request (at most admin.MaxBody) in BodyTimeout.
func (r *Replica) ServeAdmin(ctx context.Context, ln net.Listener) error {
	s := admin.New(admin.Config{
		Log: r.opts.Log.With().Str("listener", "admin").Logger(), Creds: r.Creds, Dir: r.Dir, JWT: r.JWT,
		OpenAPI: openapi.AdminDocument, Audit: r.Audit,
	})
	return serveAside(ctx, netutil.LimitListener(ln, MaxAdminConnections), s.Handler())
}

// asideShutdown bounds the graceful shutdown of a listener beside the public one.
const asideShutdown = 5 * time.Second

// serveAside serves h on ln, a listener beside the public one, until ctx ends, then
// shuts it down within asideShutdown. Its requests are bounded like the public ones, and
// so are its answers: each within BodyTimeout.
func serveAside(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: HeaderTimeout,
		ReadTimeout:       BodyTimeout,
		WriteTimeout:      BodyTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		IdleTimeout:       IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), asideShutdown)
	defer cancel()
	err := srv.Shutdown(dctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
