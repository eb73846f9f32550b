// Package deploy holds the container images and checks the docker-compose file.
package deploy

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestComposeFileIsValid runs Debian's docker-compose (v1, no engine needed) over the
// repository's docker-compose.yml, with and without the required variables.
func TestComposeFileIsValid(t *testing.T) {
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Fatal("docker-compose is not installed (scripts/setup.sh installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	config := func(env ...string) (string, error) {
		cmd := exec.CommandContext(ctx, bin, "-f", "../docker-compose.yml", "config")
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := config("AGENTFY_JWT_HS256_SECRET=0123456789abcdef0123456789abcdef", "AGENTFY_BROWSER_IMAGE_TAG=2026.11.30-1")
	if err != nil {
		t.Fatalf("docker-compose config: %v\n%s", err, out)
	}
	for _, want := range []string{
		"image: agentfy/browser-worker:2026.11.30-1", "api-a:", "api-b:", "nats:", "redis:", "seed:", "worker:",
		"ipc:/run/agentfy/ipc",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("resolved config lacks %q", want)
		}
	}
	// The IPC volume is shared by the worker and the broker only.
	var holders []string
	var service string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") && strings.HasSuffix(line, ":") {
			service = strings.TrimSuffix(strings.TrimSpace(line), ":")
		}
		if strings.Contains(line, "ipc:/run/agentfy/ipc") {
			holders = append(holders, service)
		}
	}
	if strings.Join(holders, ",") != "browser,worker" {
		t.Errorf("the IPC volume is mounted by %v, want browser and worker only", holders)
	}
	// The browser image tag is required: no mutable default.
	if out, err := config("AGENTFY_JWT_HS256_SECRET=0123456789abcdef0123456789abcdef"); err == nil {
		t.Errorf("config without AGENTFY_BROWSER_IMAGE_TAG passed:\n%.300s", out)
	}
}
