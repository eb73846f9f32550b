package deploy_test

import (
	"context"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
)

// TestComposeV2LoadsTheFile loads docker-compose.yml with compose-go, the loader of
// Compose v2 (`docker compose`), as the v1 tests run it with Debian's docker-compose:
// both read the same file. Every long-running service has a health check, every job
// one-shot, and each waits on what it needs by condition.
func TestComposeV2LoadsTheFile(t *testing.T) {
	load := func(env ...string) (map[string]struct{ health bool }, error) {
		opts, err := cli.NewProjectOptions([]string{"../docker-compose.yml"}, cli.WithName("agentfy-test"), cli.WithEnv(env))
		if err != nil {
			return nil, err
		}
		p, err := opts.LoadProject(context.Background())
		if err != nil {
			return nil, err
		}
		out := map[string]struct{ health bool }{}
		for name, s := range p.Services {
			out[name] = struct{ health bool }{s.HealthCheck != nil && len(s.HealthCheck.Test) > 0}
			for dep, d := range s.DependsOn {
				if d.Condition != "service_healthy" && d.Condition != "service_completed_successfully" {
					t.Errorf("%s waits for %s with condition %q", name, dep, d.Condition)
				}
			}
		}
		return out, nil
	}
	services, err := load("AGENTFY_BROWSER_IMAGE_TAG=2026.11.30-1")
	if err != nil {
		t.Fatalf("compose v2 refuses the file: %v", err)
	}
	for _, name := range []string{"nats", "redis", "api-a", "api-b", "site", "browser", "worker"} {
		if !services[name].health {
			t.Errorf("the long-running service %s has no health check", name)
		}
	}
	for _, name := range []string{"secrets", "seed", "session", "demo"} {
		if _, ok := services[name]; !ok {
			t.Errorf("no service %s", name)
		}
	}
	if _, err := load(); err == nil {
		t.Error("the file loaded without the browser image's immutable tag")
	}
}
