// Command composecheck is the part of the compose test (scripts/test-compose.sh) that
// speaks HTTP: from the host, through the published ports, it waits until both view
// routes return a live frame that decodes as a JPEG, as a member and as a partner would
// see it.
//
//	go run ./deploy/composecheck -url http://127.0.0.1:8080 -token JWT -key ORGKEY [-wait 90s]
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
	"time"
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
	flag.Parse()
	if *token == "" || *key == "" {
		return errors.New("-token and -key are required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *wait)
	defer cancel()
	for _, route := range []struct{ name, path, bearer string }{
		{"member", "/v1/agents/" + *agent + "/worker/view", *token},
		{"partner", "/v1/orgs/" + *org + "/agents/" + *agent + "/worker/view", *key},
	} {
		start := time.Now()
		w, h, title, err := frame(ctx, *base+route.path, route.bearer)
		if err != nil {
			return fmt.Errorf("%s route: %w", route.name, err)
		}
		fmt.Printf("%s route: a %d×%d JPEG of %q after %v\n", route.name, w, h, title, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// frame polls url as a viewer would (every 2.5 s, past the agent's gate and the
// caller's pace) until it answers a live frame, and decodes it.
func frame(ctx context.Context, url, bearer string) (w, h int, title string, err error) {
	var last string
	tick := time.NewTicker(2500 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, 0, "", err
		}
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := http.DefaultClient.Do(req)
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
					return 0, 0, "", fmt.Errorf("frame data: %w", err)
				}
				img, err := jpeg.Decode(bytes.NewReader(raw))
				if err != nil || v.Page.ContentType != "image/jpeg" {
					return 0, 0, "", fmt.Errorf("frame is not a JPEG: %v", err)
				}
				b := img.Bounds()
				return b.Dx(), b.Dy(), v.Page.Title, nil
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return 0, 0, "", fmt.Errorf("no live frame in time; last answer: %s", last)
		case <-tick.C:
		}
	}
}
