// Command composecheck is the part of the compose test (scripts/test-compose.sh) that
// speaks HTTP: from the host, through the published ports, it waits until both view
// routes return a live frame that decodes as a JPEG, as a member and as a partner would
// see it. With -fault it breaks a part while a viewer polls and checks what viewers
// see: never {"live":false} (the session lives on), and frames again within -wait of the
// fault. With -jaeger it reads the member's view back from the trace backend as one
// trace: the spans of the replicas, the worker and the broker in one tree.
//
//	go run ./deploy/composecheck -url http://127.0.0.1:8080 -token JWT -key ORGKEY [-wait 90s] [-jaeger http://127.0.0.1:16686]
//	go run ./deploy/composecheck -url … -token … -key … -fault 'docker compose restart nats' [-wait 90s]
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/jpeg"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentfy/agentfy/internal/dev/servers"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "composecheck:", err)
		os.Exit(1)
	}
}

func run() error {
	base := flag.String("url", "http://127.0.0.1:8080", "a replica's published `URL`")
	token := flag.String("token", "", "a member's JWT (agentfy token)")
	key := flag.String("key", "", "an organisation key with worker:logs:read (agentfy orgkey)")
	agent := flag.String("agent", "agent-scout", "the demo agent")
	org := flag.String("org", "org-acme", "the agent's organisation")
	wait := flag.Duration("wait", 90*time.Second, "how long a route may take to show a live frame")
	fault := flag.String("fault", "", "a shell `command` that breaks a part while a viewer polls")
	jaeger := flag.String("jaeger", "", "the trace backend's published query `URL`: read the member's view back as one trace")
	flag.Parse()
	if *token == "" || *key == "" {
		return errors.New("-token and -key are required")
	}
	if *fault != "" {
		return underFault(*base, *agent, *org, *token, *key, *fault, *wait)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *wait)
	defer cancel()
	for _, route := range []struct{ name, path, bearer string }{
		{"member", "/v1/agents/" + *agent + "/worker/view", *token},
		{"partner", "/v1/orgs/" + *org + "/agents/" + *agent + "/worker/view", *key},
	} {
		start := time.Now()
		f, err := frame(ctx, *base+route.path, route.bearer)
		if err != nil {
			return fmt.Errorf("%s route: %w", route.name, err)
		}
		fmt.Printf("%s route: a %d×%d JPEG of %q after %v\n", route.name, f.w, f.h, f.title, time.Since(start).Round(time.Millisecond))
		if *jaeger != "" && route.name == "member" {
			if err := oneTrace(ctx, *jaeger, f.traceResponse); err != nil {
				return fmt.Errorf("%s route's trace: %w", route.name, err)
			}
		}
	}
	return nil
}

// viewer is the check's HTTP client: each request has its own deadline (a view answers
// within 9 s), so one connection that hangs on the way (a port proxy that accepted it
// and never passed it on) costs one poll, not the whole wait.
var viewer = &http.Client{Timeout: 15 * time.Second}

// live is a live frame's answer: the JPEG's size, the page's title and the W3C
// traceresponse header of a traced view.
type live struct {
	w, h          int
	title         string
	traceResponse string
}

// frame polls url as a viewer would (every 2.5 s, past the agent's gate and the
// caller's pace) until it answers a live frame, and decodes it.
func frame(ctx context.Context, url, bearer string) (live, error) {
	var last string
	tick := time.NewTicker(2500 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return live{}, err
		}
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := viewer.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
			_ = resp.Body.Close()
			var v struct {
				Live bool `json:"live"`
				Page *struct {
					Title       string `json:"title"`
					ContentType string `json:"contentType"`
					Data        string `json:"data"`
				} `json:"page"`
			}
			last = fmt.Sprintf("%d %.120s", resp.StatusCode, body)
			if resp.StatusCode == http.StatusOK && json.Unmarshal(body, &v) == nil && v.Live && v.Page != nil {
				raw, err := base64.StdEncoding.DecodeString(v.Page.Data)
				if err != nil {
					return live{}, fmt.Errorf("frame data: %w", err)
				}
				img, err := jpeg.Decode(bytes.NewReader(raw))
				if err != nil || v.Page.ContentType != "image/jpeg" {
					return live{}, fmt.Errorf("frame is not a JPEG: %v", err)
				}
				b := img.Bounds()
				return live{w: b.Dx(), h: b.Dy(), title: v.Page.Title, traceResponse: resp.Header.Get("traceresponse")}, nil
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return live{}, fmt.Errorf("no live frame in time; last answer: %s", last)
		case <-tick.C:
		}
	}
}

// answer is one poll's answer, by kind: frame, no_tab, not_live, or the status.
func answer(ctx context.Context, url, bearer string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "error"
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := viewer.Do(req)
	if err != nil {
		return "transport_error"
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprint(resp.StatusCode)
	}
	var v struct {
		Live bool            `json:"live"`
		Page json.RawMessage `json:"page"`
	}
	switch {
	case json.Unmarshal(body, &v) != nil:
		return "bad_body"
	case !v.Live:
		return "not_live"
	case string(v.Page) == "null":
		return "no_tab"
	}
	return "frame"
}

// underFault waits for a frame, then runs fault while two viewers (the member and the
// partner, 2.1 s apart, each every 4.2 s: past the agent's 2-s window and each one's
// 3-s pace) poll, and polls on until a frame arrives after the fault command ended. It
// fails on any answer but a frame, no tab, 429 or 503 — {"live":false} (a fault is never
// a stopped session), a 404 or 401 (nothing may be lost) — and when no frame comes
// within wait of the fault.
func underFault(base, agent, org, token, key, fault string, wait time.Duration) error {
	member := base + "/v1/agents/" + agent + "/worker/view"
	partner := base + "/v1/orgs/" + org + "/agents/" + agent + "/worker/view"
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	defer cancel()
	if _, err := frame(ctx, member, token); err != nil {
		return fmt.Errorf("before the fault: %w", err)
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		cmd := exec.CommandContext(ctx, "sh", "-c", fault) //nolint:gosec // the compose test's own command
		out, err := cmd.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%q: %w: %s", fault, err, out)
		}
		done <- err
	}()
	seen := map[string]int{}
	var ended time.Time
	tick := time.NewTicker(2100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case err := <-done:
			if err != nil {
				return err
			}
			ended = time.Now()
		default:
		}
		url, bearer := member, token
		if i%2 == 1 {
			url, bearer = partner, key
		}
		a := answer(ctx, url, bearer)
		seen[a]++
		switch a {
		case "frame", "no_tab", "429", "503":
		default:
			// live:false would tell a viewer the browser is closed; a 404 or 401 that the
			// directory or the credentials were lost.
			return fmt.Errorf("fault %q: a viewer got %s (answers so far %v)", fault, a, seen)
		}
		// Live again: a frame, or no tab — a broker that crashed comes back with a new
		// Chromium, which has no tab until the agent opens one.
		if (a == "frame" || a == "no_tab") && !ended.IsZero() {
			fmt.Printf("fault %q: answers %v; live again (%s) %.1f s after the fault began (the command took %.1f s)\n",
				fault, seen, a, time.Since(start).Seconds(), ended.Sub(start).Seconds())
			return nil
		}
		if time.Since(start) > wait {
			return fmt.Errorf("fault %q: not live again within %v (answers %v)", fault, wait, seen)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("fault %q: %w (answers %v)", fault, ctx.Err(), seen)
		case <-tick.C:
		}
	}
}

// The services of a view's trace (internal/telemetry), and the spans a frame's view has
// at least: the view, its NATS request and relay, the worker's JSON-RPC call and its
// request on the broker's socket, the broker's capture, its consume call and the
// replica's consume route (docs/operating.md, "Traces").
var (
	traceServices = []string{"agentfy-api", "agentfy-broker", "agentfy-worker"}
	minViewSpans  = 8
)

// oneTrace reads the view's trace (its id from the traceresponse header) from Jaeger's
// query API at base until it holds the spans of every part, polling while the parts'
// batches arrive, and checks that they form one tree: one root, and every other span's
// parent in the trace. It prints the tree with each span's offset and duration.
func oneTrace(ctx context.Context, base, traceResponse string) error {
	parts := strings.Split(traceResponse, "-")
	if len(parts) != 4 || len(parts[1]) != 32 {
		return fmt.Errorf("traceresponse %q: the view was not traced", traceResponse)
	}
	id := parts[1]
	jaeger := servers.JaegerAt(base)
	var last string
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		tr, err := jaeger.Trace(ctx, id)
		if err == nil {
			if err = checkTree(tr); err == nil {
				fmt.Printf("trace %s in the trace backend: %d spans in one tree\n%s", id, len(tr.Spans), describe(tr))
				return nil
			}
		}
		last = err.Error()
		select {
		case <-ctx.Done():
			return fmt.Errorf("trace %s: not one whole trace in time: %s", id, last)
		case <-tick.C:
		}
	}
}

// checkTree says what keeps tr from being a whole view's trace.
func checkTree(tr servers.JaegerTrace) error {
	if len(tr.Spans) < minViewSpans {
		return fmt.Errorf("%d spans so far, want at least %d", len(tr.Spans), minViewSpans)
	}
	ids := map[string]bool{}
	var services []string
	for _, s := range tr.Spans {
		ids[s.SpanID] = true
		if name := tr.Service(s); !slices.Contains(services, name) {
			services = append(services, name)
		}
	}
	sort.Strings(services)
	if !slices.Equal(services, traceServices) {
		return fmt.Errorf("services %v, want %v", services, traceServices)
	}
	roots := 0
	for _, s := range tr.Spans {
		switch parent := s.Parent(); {
		case parent == "":
			roots++
		case !ids[parent]:
			return fmt.Errorf("span %q has its parent %s outside the trace", s.OperationName, parent)
		}
	}
	if roots != 1 {
		return fmt.Errorf("%d roots, want 1", roots)
	}
	return nil
}

// describe renders tr as a tree: service, span, offset from the root's start, duration.
func describe(tr servers.JaegerTrace) string {
	children := map[string][]int{}
	root := -1
	for i, s := range tr.Spans {
		parent := s.Parent()
		if parent == "" {
			root = i
			continue
		}
		children[parent] = append(children[parent], i)
	}
	var b strings.Builder
	var walk func(i, depth int)
	walk = func(i, depth int) {
		s := tr.Spans[i]
		fmt.Fprintf(&b, "  %s%-16s %-50s +%6.1f ms %6.1f ms\n", strings.Repeat("  ", depth), tr.Service(s),
			s.OperationName, float64(s.StartTime-tr.Spans[root].StartTime)/1e3, float64(s.Duration)/1e3)
		kids := children[s.SpanID]
		sort.Slice(kids, func(a, b int) bool { return tr.Spans[kids[a]].StartTime < tr.Spans[kids[b]].StartTime })
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	walk(root, 0)
	return b.String()
}
