package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/channel"
	"github.com/agentfy/agentfy/cmd/internal/conf"
	"github.com/agentfy/agentfy/cmd/internal/operator"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/wire"
)

// toolCaller runs one tool call in the demo agent's session.
type toolCaller func(ctx context.Context, name string, args any) (json.RawMessage, error)

// demoStep is the time between two tool calls of the demo agent.
const demoStep = 3 * time.Second

// browseDemo plays the demo agent's script on site — three tabs (one of them a checkout page of secrets), typing, scrolling,
// navigating, so that frames change — one tool call every demoStep, until ctx ends or
// alive says the session is over. The development stack and `agentfy-dev demo` (the
// compose stack) run the same script.
func browseDemo(ctx context.Context, call toolCaller, site string, alive func(context.Context) bool, log zerolog.Logger) {
	tabs := map[string]string{}
	open := func(name, path string) {
		res, err := call(ctx, wire.ToolOpen, map[string]string{"url": site + path})
		if err != nil {
			log.Warn().Err(err).Msg("demo: open")
			return
		}
		var tab struct {
			TabID string `json:"tabId"`
		}
		if json.Unmarshal(res, &tab) == nil {
			tabs[name] = tab.TabID
		}
	}
	pages := []struct{ name, path string }{
		{"catalog", "/catalog.html"},
		{"account", "/account.html"},
		{"checkout", "/checkout.html"}, // a page of secrets, which viewers see masked
	}
	play := func(name string, steps ...map[string]any) error {
		_, err := call(ctx, wire.ToolPlay, map[string]any{"tabId": tabs[name], "steps": steps})
		if err != nil && strings.Contains(err.Error(), "unknown_tab") {
			// The browser restarted (a broker crash) and the tab is gone: open it
			// again, as the agent would, so that viewers see a page.
			for _, p := range pages {
				if p.name == name {
					open(p.name, p.path)
				}
			}
		}
		return err
	}
	for _, p := range pages {
		open(p.name, p.path)
	}
	script := []func() error{
		func() error {
			return play("checkout", map[string]any{"action": "type", "selector": "#cc-csc", "text": "1"})
		},
		func() error { return play("checkout", map[string]any{"action": "scroll", "y": 1200}) }, // the secrets below the fold
		func() error {
			return play("checkout", map[string]any{"action": "navigate", "url": site + "/checkout.html"})
		},
		func() error {
			return play("catalog", map[string]any{"action": "type", "selector": "#q", "text": "stapler"})
		},
		func() error { return play("catalog", map[string]any{"action": "scroll", "y": 400}) },
		func() error { return play("account", map[string]any{"action": "scroll", "y": 200}) },
		func() error { return play("catalog", map[string]any{"action": "scroll", "y": -400}) },
		func() error {
			return play("catalog", map[string]any{"action": "navigate", "url": site + "/"}, map[string]any{"action": "click", "selector": "#to-catalog"})
		},
		func() error {
			return play("account", map[string]any{"action": "navigate", "url": site + "/account.html"})
		},
	}
	tick := time.NewTicker(demoStep)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !alive(ctx) {
			return
		}
		if err := script[i%len(script)](); err != nil {
			log.Warn().Err(err).Msg("demo: tool call")
			if errors.Is(ctx.Err(), context.Canceled) {
				return
			}
		}
	}
}

// cmdDemo is the demo agent of the compose stack: it waits for the agent's session and
// browses the demo site in it through tool calls over NATS, with the operator's
// credentials, as `agentfy-dev dev`'s demo agent does; when the session ends it waits for
// the next one.
func cmdDemo(ctx context.Context, args []string, _ io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	agent := fs.String("agent", "agent-scout", "agent `id`")
	site := fs.String("site", "http://site:8000", "base `URL` of the demo site, as the agent's browser reaches it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := conf.Logger("demo")
	st, err := operator.OpenStores(ctx)
	if err != nil {
		return err
	}
	defer operator.CloseRedis(st.RDB)
	nc, ns, err := operator.Bus("agentfy-demo", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	wait := time.NewTicker(2 * time.Second) // how often to look for a session
	defer wait.Stop()
	for {
		sess, err := st.Sessions.Current(ctx, *agent)
		switch {
		case err == nil && sess.Owner != "":
			log.Info().Str("session", sess.ID).Msg("demo: browsing")
			call := func(ctx context.Context, name string, args any) (json.RawMessage, error) {
				// The owner may change (the worker moves to another replica): ask anew.
				cur, err := st.Sessions.Get(ctx, sess.ID)
				if err != nil {
					return nil, err
				}
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				return channel.CallTool(cctx, nc, ns, cur, name, args)
			}
			alive := func(ctx context.Context) bool {
				cur, err := st.Sessions.Get(ctx, sess.ID)
				return err != nil || st.Sessions.Status(cur) != session.Stopped
			}
			browseDemo(ctx, call, *site, alive, log)
		case err != nil && !errors.Is(err, session.ErrNoSession):
			log.Warn().Err(err).Msg("demo: session")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wait.C:
		}
	}
}

// cmdSite serves the demo website (testdata/site) for the compose stack.
func cmdSite(ctx context.Context, args []string, _ io.Writer) error {
	fs := flag.NewFlagSet("site", flag.ContinueOnError)
	dir := fs.String("dir", "testdata/site", "`directory` to serve")
	listen := fs.String("listen", ":8000", "`address` to listen on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, err := os.Stat(*dir); err != nil {
		return fmt.Errorf("site: %w", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(*dir)), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
