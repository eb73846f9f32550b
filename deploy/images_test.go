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

// TestBuildStage: every Dockerfile builds the binaries in the same stage, word for word
// (the layer cache then builds them once for all the images), and that stage's list of
// packages to compile ahead of this repository's code, build-deps.txt, is exactly what
// the binaries link from other modules, for Linux without cgo as the stage builds them:
// a package missing from it is compiled at every change of the code, one left over at
// every change of the list.
func TestBuildStage(t *testing.T) {
	files, err := filepath.Glob("*.Dockerfile")
	if err != nil || len(files) < 4 {
		t.Fatalf("Dockerfiles: %v %v", files, err)
	}
	stageOf := regexp.MustCompile(`(?ms)^FROM golang:\S+ AS build\n.*?\n(?:FROM )`)
	var stage string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := stageOf.FindString(string(b))
		switch {
		case s == "":
			t.Fatalf("%s has no build stage", f)
		case stage == "":
			stage = s
		case s != stage:
			t.Errorf("%s's build stage is not %s's, word for word", f, files[0])
		}
	}
	if !strings.Contains(stage, "COPY go.mod go.sum deploy/build-deps.txt ./\n") || !strings.Contains(stage, "go build -trimpath $(cat build-deps.txt)\n") {
		t.Fatalf("the build stage does not compile build-deps.txt ahead of the code:\n%s", stage)
	}
	cmds := regexp.MustCompile(`(?m)go build -trimpath -o /out/ ((?:\./cmd/[\w-]+ )+)`).FindStringSubmatch(stage)
	if cmds == nil {
		t.Fatalf("no go build of ./cmd/... in the build stage:\n%s", stage)
	}
	args := []string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}
	for _, c := range strings.Fields(cmds[1]) {
		args = append(args, "."+c)
	}
	list := exec.CommandContext(t.Context(), "go", args...)
	list.Env = append(os.Environ(), "GOOS=linux", "CGO_ENABLED=0")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go %v: %v", args, err)
	}
	var want []string
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/agentfy/agentfy" && !strings.HasPrefix(p, "github.com/agentfy/agentfy/") {
			want = append(want, p)
		}
	}
	slices.Sort(want)
	want = slices.Compact(want)
	b, err := os.ReadFile("build-deps.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(b)); !slices.Equal(got, want) || string(b) != strings.Join(want, "\n")+"\n" {
		t.Errorf("deploy/build-deps.txt is not what %s link from other modules; write it with\n"+
			"  GOOS=linux CGO_ENABLED=0 go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' %s | grep -v '^github.com/agentfy/agentfy' | LC_ALL=C sort -u | grep . > deploy/build-deps.txt",
			strings.TrimSpace(cmds[1]), strings.TrimSpace(cmds[1]))
	}
}
