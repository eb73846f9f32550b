package deploy_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v4"
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
	out, err := config("AGENTFY_BROWSER_IMAGE_TAG=2026.11.30-1")
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
	if out, err := config(); err == nil {
		t.Errorf("config without AGENTFY_BROWSER_IMAGE_TAG passed:\n%.300s", out)
	}
}

// TestComposeLeastPrivilege reads the resolved compose file as an operator would audit
// it: Redis and NATS sit on the internal backend network with the replicas and the jobs
// only; the worker and the broker are on the edge network (and the internal telemetry
// network, to export spans) and hold no Redis or NATS setting; Jaeger alone is on the
// traces network, where its UI listens, and its port is published on loopback only;
// each process mounts only its own role's secrets; and the servers load the rendered
// role configurations.
func TestComposeLeastPrivilege(t *testing.T) {
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Fatal("docker-compose is not installed (scripts/setup.sh installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-f", "../docker-compose.yml", "config")
	cmd.Env = append(os.Environ(), "AGENTFY_BROWSER_IMAGE_TAG=2026.11.30-1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docker-compose config: %v", err)
	}
	var cfg struct {
		Services map[string]struct {
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Networks    map[string]any    `yaml:"networks"`
			NetworkMode string            `yaml:"network_mode"`
			Volumes     []string          `yaml:"volumes"`
			Ports       []any             `yaml:"ports"`
		} `yaml:"services"`
		Networks map[string]struct {
			Internal bool `yaml:"internal"`
		} `yaml:"networks"`
	}
	if err := yaml.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	if !cfg.Networks["backend"].Internal || !cfg.Networks["web"].Internal || !cfg.Networks["telemetry"].Internal {
		t.Error("the backend, web or telemetry network is not internal")
	}
	networks := func(service string) string {
		var n []string
		for name := range cfg.Services[service].Networks {
			n = append(n, name)
		}
		sort.Strings(n)
		return strings.Join(n, ",")
	}
	secrets := func(service string) []string {
		var v []string
		for _, vol := range cfg.Services[service].Volumes {
			if strings.HasPrefix(vol, "secrets-") {
				v = append(v, strings.SplitN(vol, ":", 2)[0])
			}
		}
		return v
	}
	for _, tc := range []struct {
		service, networks, user string
		secrets                 []string
	}{
		{"redis", "backend", "", []string{"secrets-redis"}},
		{"nats", "backend", "", []string{"secrets-nats"}},
		{"seed", "backend", "agentfy-operator", []string{"secrets-operator", "secrets-jwt"}},
		{"session", "backend", "agentfy-operator", []string{"secrets-operator", "secrets-jwt"}},
		{"cli", "backend", "agentfy-operator", []string{"secrets-operator", "secrets-jwt"}},
		{"demo", "backend", "agentfy-operator", []string{"secrets-operator", "secrets-jwt"}},
		{"api-a", "backend,edge,telemetry", "agentfy-replica", []string{"secrets-replica", "secrets-jwt"}},
		{"api-b", "backend,edge,telemetry", "agentfy-replica", []string{"secrets-replica", "secrets-jwt"}},
		// The agent's browser reaches the API, the demo website and the span receiver,
		// nothing else.
		{"browser", "edge,telemetry,web", "", nil},
		{"worker", "edge,telemetry", "", nil},
		{"site", "web", "", nil},
		{"jaeger", "telemetry,traces", "", nil},
	} {
		t.Run(tc.service, func(t *testing.T) {
			if got := networks(tc.service); got != tc.networks {
				t.Errorf("networks %q, want %q", got, tc.networks)
			}
			if got := secrets(tc.service); strings.Join(got, ",") != strings.Join(tc.secrets, ",") {
				t.Errorf("secret volumes %v, want %v", got, tc.secrets)
			}
			env := cfg.Services[tc.service].Environment
			if tc.user != "" && (env["AGENTFY_NATS_USER"] != tc.user || env["AGENTFY_REDIS_USERNAME"] != tc.user) {
				t.Errorf("NATS user %q and Redis user %q, want %s", env["AGENTFY_NATS_USER"], env["AGENTFY_REDIS_USERNAME"], tc.user)
			}
			if tc.service == "browser" || tc.service == "worker" || tc.service == "site" {
				for k := range env {
					if strings.Contains(k, "REDIS") || strings.Contains(k, "NATS") || strings.Contains(k, "JWT") {
						t.Errorf("%s has %s", tc.service, k)
					}
				}
			}
		})
	}
	for name, svc := range cfg.Services {
		if _, ok := svc.Networks["traces"]; ok && name != "jaeger" {
			t.Errorf("%s is on the traces network, where Jaeger's UI listens", name)
		}
	}
	if p := cfg.Services["jaeger"].Ports; len(p) != 1 || !strings.Contains(fmt.Sprint(p[0]), "127.0.0.1") {
		t.Errorf("jaeger publishes %v, want one port on 127.0.0.1", p)
	}
	if s := cfg.Services["secrets"]; s.NetworkMode != "none" {
		t.Errorf("the secrets job has network mode %q, want none", s.NetworkMode)
	}
	if c := strings.Join(cfg.Services["redis"].Command, " "); !strings.Contains(c, "--aclfile /etc/agentfy/users.acl") {
		t.Errorf("redis runs %q without the ACL file", c)
	}
	if c := strings.Join(cfg.Services["nats"].Command, " "); !strings.Contains(c, "--config /etc/agentfy/nats-server.conf") || strings.Contains(c, "max_payload") {
		t.Errorf("nats runs %q", c)
	}
}
