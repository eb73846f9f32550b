package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// development is what no binary of a production image may link: the embedded NATS
// server, everything in the development and test places of internal/ (the local stack,
// its servers, the test harness), and the benchmark (bench/).
var development = []string{
	"github.com/nats-io/nats-server/v2/server",
	"github.com/agentfy/agentfy/internal/dev/",
	"github.com/agentfy/agentfy/internal/test/",
	"github.com/agentfy/agentfy/bench",
	// The compose test's HTTP side (scripts/test-compose.sh), which reads traces back
	// through the harness's Jaeger client.
	"github.com/agentfy/agentfy/deploy/composecheck",
}

// isDevelopment reports whether package p is development's (a prefix of the list, or
// one of its packages).
func isDevelopment(p string) bool {
	for _, d := range development {
		if p == d || (strings.HasSuffix(d, "/") && strings.HasPrefix(p, d)) {
			return true
		}
	}
	return false
}

// own are the packages only the binary of their part may link: Chromium's driver and
// the broker are the broker's, the worker the worker's.
var own = map[string][]string{
	"github.com/go-rod/rod":                       {"agentfy-broker"},
	"github.com/agentfy/agentfy/broker":           {"agentfy-broker"},
	"github.com/agentfy/agentfy/broker/masks":     {"agentfy-broker"},
	"github.com/agentfy/agentfy/broker/jpegmask":  {"agentfy-broker"},
	"github.com/agentfy/agentfy/worker":           {"agentfy-worker"},
	"github.com/agentfy/agentfy/channel":          {"agentfy-api", "agentfy"},
	"github.com/agentfy/agentfy/api":              {"agentfy-api"},
	"github.com/agentfy/agentfy/api/admin":        {"agentfy-api"},
	"github.com/agentfy/agentfy/api/answer":       {"agentfy-api"},
	"github.com/agentfy/agentfy/api/metrics":      {"agentfy-api"},
	"github.com/agentfy/agentfy/internal/replica": {"agentfy-api"},
}

// TestProductionImagesLinkNoDevelopment reads the binaries each production Dockerfile
// ships (every one but dev.Dockerfile) and lists what each links: nothing of
// development, and no other part's code.
func TestProductionImagesLinkNoDevelopment(t *testing.T) {
	files, err := filepath.Glob("*.Dockerfile")
	if err != nil || len(files) < 3 {
		t.Fatalf("Dockerfiles: %v %v", files, err)
	}
	copied := regexp.MustCompile(`(?m)^COPY --from=build ((?:/out/[\w-]+ )+)`)
	shipped := 0
	for _, f := range files {
		if f == "dev.Dockerfile" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range copied.FindAllStringSubmatch(string(b), -1) {
			for _, bin := range strings.Fields(m[1]) {
				bin = strings.TrimPrefix(bin, "/out/")
				if bin == "run" {
					continue
				}
				shipped++
				t.Run(f+"/"+bin, func(t *testing.T) {
					out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "../cmd/"+bin).Output()
					if err != nil {
						t.Fatalf("go list -deps ./cmd/%s: %v", bin, err)
					}
					deps := strings.Fields(string(out))
					for _, p := range deps {
						if isDevelopment(p) {
							t.Errorf("%s links %s", bin, p)
						}
					}
					for p, owners := range own {
						if slices.Contains(deps, p) && !slices.Contains(owners, bin) {
							t.Errorf("%s links %s, which is %v's", bin, p, owners)
						}
					}
				})
			}
		}
	}
	if shipped < 4 {
		t.Fatalf("found %d binaries in the production images, want agentfy-api, agentfy, agentfy-worker, agentfy-broker", shipped)
	}
}

// TestStoresLinkNoBus: the stores spell their keys with keyspace and link no NATS
// client: a process that only reads the directory, credentials or sessions does not
// carry the bus.
func TestStoresLinkNoBus(t *testing.T) {
	for _, p := range []string{"auth", "directory", "session", "keyspace"} {
		out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "../"+p).Output()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v", p, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/nats-io/") || dep == "github.com/agentfy/agentfy/bus" {
				t.Errorf("%s links %s", p, dep)
			}
		}
	}
}

// TestAPIImportsNoRedisClient: the HTTP edge (api and the packages under it) parses,
// calls and renders; the rules of who may see an agent are access's, and every Redis
// read a store's.
func TestAPIImportsNoRedisClient(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-f", "{{join .Imports \" \"}}", "../api/...").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range strings.Fields(string(out)) {
		if strings.HasPrefix(imp, "github.com/redis/") {
			t.Errorf("api imports %s", imp)
		}
	}
}

// TestLayers: internal/ has three places — production helpers (internal/ttlmap,
// internal/redisclient, internal/replica), development (internal/dev: the stack and its
// servers; and bench/, the benchmark) and tests (internal/test: the harness). Only the
// binaries (cmd/) and the development and test places themselves may import from the
// last two; tests of any package may (go list's Imports are the non-test imports).
func TestLayers(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "../...").Output()
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/agentfy/agentfy/"
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := fields[0]
		if strings.HasPrefix(pkg, module+"cmd/") || isDevelopment(pkg) {
			continue
		}
		checked++
		for _, imp := range fields[1:] {
			if isDevelopment(imp) {
				t.Errorf("%s imports %s (development or test)", pkg, imp)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d packages; go list ../... found too few", checked)
	}
}
