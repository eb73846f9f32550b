package deploy_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"go.yaml.in/yaml/v4"
)

// composeV1 is Debian's docker-compose over the repository's docker-compose.yml, run
// from the repository's root as its users run it: compose v1 reads the browser's
// seccomp profile (security_opt seccomp=./deploy/…) from its working directory.
func composeV1(ctx context.Context, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, append([]string{"-f", "docker-compose.yml"}, args...)...)
	cmd.Dir = ".."
	return cmd
}

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
		cmd := composeV1(ctx, bin, "config")
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
// only; the worker and the broker are on the internal edge network, the browser alone on
// browse, its way to the internet, the replicas alone on public (and the internal telemetry
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
	cmd := composeV1(ctx, bin, "config")
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
			CapAdd      []string          `yaml:"cap_add"`
			CapDrop     []string          `yaml:"cap_drop"`
			SecurityOpt []string          `yaml:"security_opt"`
			ReadOnly    bool              `yaml:"read_only"`
			Privileged  bool              `yaml:"privileged"`
			Tmpfs       any               `yaml:"tmpfs"`
			User        string            `yaml:"user"`
			Pid         string            `yaml:"pid"`
			Ipc         string            `yaml:"ipc"`
			UsernsMode  string            `yaml:"userns_mode"`
			Devices     []any             `yaml:"devices"`
		} `yaml:"services"`
		Networks map[string]struct {
			Internal bool `yaml:"internal"`
		} `yaml:"networks"`
	}
	if err := yaml.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	// Only the replicas' published ports (public), the browser's way to the internet
	// (browse) and Jaeger's UI (traces) leave the machine's bridges; the worker's edge
	// does not.
	for _, name := range []string{"backend", "edge", "web", "telemetry"} {
		if !cfg.Networks[name].Internal {
			t.Errorf("the %s network is not internal", name)
		}
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
		{"audit-stream", "backend", "agentfy-operator", []string{"secrets-operator", "secrets-jwt"}},
		{"seed", "backend", "agentfy-operator", []string{"secrets-operator", "secrets-jwt"}},
		{"session", "backend", "agentfy-operator", []string{"secrets-operator", "secrets-jwt"}},
		{"cli", "backend", "agentfy-operator", []string{"secrets-operator", "secrets-jwt"}},
		{"demo", "backend", "agentfy-operator", []string{"secrets-operator", "secrets-jwt"}},
		{"api-a", "backend,edge,public,telemetry", "agentfy-replica", []string{"secrets-replica", "secrets-jwt"}},
		{"api-b", "backend,edge,public,telemetry", "agentfy-replica", []string{"secrets-replica", "secrets-jwt"}},
		// The agent's browser reaches the API (its broker's consume route), the demo
		// website, the span receiver, and the internet on a network of its own.
		{"browser", "browse,edge,telemetry,web", "", nil},
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
	// The same privileges as compose v2 reads (TestComposeHardening), as v1 resolves
	// them: its anchors and merge keys are its own YAML library's.
	v1 := map[string]serviceConfig{}
	for name, svc := range cfg.Services {
		var tmpfs []string
		switch v := svc.Tmpfs.(type) {
		case string:
			tmpfs = []string{v}
		case []any:
			for _, m := range v {
				tmpfs = append(tmpfs, fmt.Sprint(m))
			}
		}
		v1[name] = serviceConfig{
			CapAdd: svc.CapAdd, CapDrop: svc.CapDrop, SecurityOpt: svc.SecurityOpt, ReadOnly: svc.ReadOnly,
			Privileged: svc.Privileged, Tmpfs: tmpfs, User: svc.User, NetworkMode: svc.NetworkMode,
			Pid: svc.Pid, Ipc: svc.Ipc, UsernsMode: svc.UsernsMode, Devices: len(svc.Devices),
		}
	}
	checkHardening(t, v1)
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

// hardening is what each service of docker-compose.yml runs with (issue 48): no
// Linux capability (cap_drop ALL, and in capAdd only what a service provably needs, each with
// its reason in docker-compose.yml — today none), no-new-privileges, never privileged or
// unconfined, a read-only root file system, and Docker's default seccomp profile but
// for the browser's. The static tests (v1 and v2) check the file against it, the
// running stack's test (TestRunningStackHardening) the containers.
var hardening = map[string]struct {
	capAdd  []string // Linux capabilities added back
	seccomp string   // the seccomp profile, from the repository's root; "" is Docker's default
	tmpfs   []string // tmpfs mount points
	user    string   // the user, where the compose file sets one
}{
	"secrets": {}, "nats": {}, "audit-stream": {}, "seed": {}, "session": {}, "cli": {}, "api-a": {}, "api-b": {},
	"site": {}, "demo": {}, "jaeger": {},
	// As the image's redis user from the start: its entrypoint would otherwise switch
	// users as root (CAP_SETUID, CAP_SETGID, CAP_CHOWN).
	"redis": {user: "redis"},
	// Chromium's profiles and shared memory under /tmp; Chromium's sandbox needs three
	// calls Docker's default profile refuses (deploy/seccomp/README.md).
	"browser": {seccomp: browserSeccompProfile, tmpfs: []string{"/tmp"}},
	// The health file.
	"worker": {tmpfs: []string{"/tmp"}},
}

// browserSeccompProfile is the browser's seccomp profile, from the repository's root.
const browserSeccompProfile = "deploy/seccomp/chromium.json"

// serviceConfig is what checkHardening reads of a service, as compose v1 or v2 resolved it.
type serviceConfig struct {
	CapAdd, CapDrop, SecurityOpt, Tmpfs     []string
	ReadOnly, Privileged                    bool
	User, NetworkMode, Pid, Ipc, UsernsMode string
	Devices                                 int
}

// securityOpt splits a security_opt entry as Docker does: "key=value" or "key:value".
func securityOpt(opt string) (key, value string) {
	if k, v, ok := strings.Cut(opt, "="); ok {
		return k, v
	}
	k, v, _ := strings.Cut(opt, ":")
	return k, v
}

// checkHardening checks every service against hardening, and that hardening names every
// service (a new service must say what it runs with). Each check fails on its mutation
// of docker-compose.yml: cap_drop removed or narrowed; a cap_add (SYS_ADMIN or any other
// not in the table); no-new-privileges removed or false; privileged: true;
// seccomp/apparmor/systempaths unconfined or label:disable; a seccomp profile on another
// service or another profile on the browser; read_only removed; the host's PID, IPC,
// network or user namespace; a device; the browser's or the worker's tmpfs removed; the
// Redis user removed.
func checkHardening(t *testing.T, services map[string]serviceConfig) {
	t.Helper()
	for name := range hardening {
		if _, ok := services[name]; !ok {
			t.Errorf("no service %s in docker-compose.yml", name)
		}
	}
	for name, s := range services {
		want, ok := hardening[name]
		if !ok {
			t.Errorf("service %s: not in the hardening table: say what it runs with", name)
			continue
		}
		if !slices.Equal(s.CapDrop, []string{"ALL"}) {
			t.Errorf("service %s: cap_drop %v, want [ALL]", name, s.CapDrop)
		}
		if !slices.Equal(s.CapAdd, want.capAdd) {
			t.Errorf("service %s: cap_add %v, want %v", name, s.CapAdd, want.capAdd)
		}
		if s.Privileged {
			t.Errorf("service %s is privileged", name)
		}
		if !s.ReadOnly {
			t.Errorf("service %s: root file system not read-only", name)
		}
		if s.User != want.user {
			t.Errorf("service %s: user %q, want %q", name, s.User, want.user)
		}
		for _, ns := range []struct{ what, mode string }{{"pid", s.Pid}, {"ipc", s.Ipc}, {"network_mode", s.NetworkMode}, {"userns_mode", s.UsernsMode}} {
			if ns.mode == "host" {
				t.Errorf("service %s: %s host", name, ns.what)
			}
		}
		if s.Devices != 0 {
			t.Errorf("service %s has devices", name)
		}
		var mounts []string
		for _, m := range s.Tmpfs {
			mounts = append(mounts, strings.SplitN(m, ":", 2)[0])
		}
		if !slices.Equal(mounts, want.tmpfs) {
			t.Errorf("service %s: tmpfs %v, want %v", name, s.Tmpfs, want.tmpfs)
		}
		noNewPrivileges, seccomp := false, ""
		for _, opt := range s.SecurityOpt {
			k, v := securityOpt(opt)
			switch {
			case k == "no-new-privileges":
				noNewPrivileges = v == "" || v == "true"
			case k == "seccomp":
				seccomp = strings.TrimPrefix(v, "./")
			case v == "unconfined" || opt == "label=disable" || opt == "label:disable":
				t.Errorf("service %s: security_opt %q", name, opt)
			}
		}
		if !noNewPrivileges {
			t.Errorf("service %s: security_opt %v lacks no-new-privileges:true", name, s.SecurityOpt)
		}
		if seccomp != want.seccomp {
			t.Errorf("service %s: seccomp profile %q, want %q", name, seccomp, want.seccomp)
		}
	}
}

// TestComposeHardening reads every service's privileges from docker-compose.yml with
// compose-go, the loader of Compose v2, without Docker or docker-compose: the same
// checks as the running stack's (TestRunningStackHardening), from the file. It also
// checks that the browser's seccomp profile is where compose v2 looks for it (the
// compose file's directory) and that the browser keeps its shared memory.
func TestComposeHardening(t *testing.T) {
	opts, err := cli.NewProjectOptions([]string{"../docker-compose.yml"}, cli.WithName("agentfy-test"),
		cli.WithEnv([]string{"AGENTFY_BROWSER_IMAGE_TAG=2026.11.30-1"}), cli.WithProfiles([]string{"*"}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	services := map[string]serviceConfig{}
	for name, s := range p.Services {
		services[name] = serviceConfig{
			CapAdd: s.CapAdd, CapDrop: s.CapDrop, SecurityOpt: s.SecurityOpt, Tmpfs: s.Tmpfs, ReadOnly: s.ReadOnly,
			Privileged: s.Privileged, User: s.User, NetworkMode: s.NetworkMode, Pid: s.Pid, Ipc: s.Ipc,
			UsernsMode: s.UserNSMode, Devices: len(s.Devices),
		}
	}
	checkHardening(t, services)
	if _, err := os.Stat(p.RelativePath(browserSeccompProfile)); err != nil {
		t.Errorf("the browser's seccomp profile: %v", err)
	}
	if b := p.Services["browser"]; b.ShmSize < 64<<20 {
		t.Errorf("the browser's shm_size is %d bytes", b.ShmSize)
	}
}

// defaultSeccompProfileSum is the SHA-256 of Docker's default seccomp profile as this
// project's engine has it (Debian's docker.io 20.10.24+dfsg1-1+deb12u1,
// profiles/seccomp/default.json; deploy/seccomp/README.md), canonically encoded
// (encoding/json of the decoded file).
const defaultSeccompProfileSum = "af8fcb4cc4e869779f98c0dfb49ac6420c8ffc95cbdf5846bcfd93489b4b24c0"

// The clone and unshare namespace flags the browser's profile refuses
// (deploy/seccomp/README.md): clone may make user, PID and network namespaces, unshare
// only a user namespace.
const (
	cloneNamespacesRefused   = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000       // NEWNS, NEWCGROUP, NEWUTS, NEWIPC
	unshareNamespacesRefused = cloneNamespacesRefused | 0x20000000 | 0x40000000 | 0x80 // and NEWPID, NEWNET, NEWTIME
)

type seccompRule struct {
	Names  []string `json:"names"`
	Action string   `json:"action"`
	Args   []struct {
		Index    uint   `json:"index"`
		Value    uint64 `json:"value"`
		ValueTwo uint64 `json:"valueTwo"`
		Op       string `json:"op"`
	} `json:"args"`
	Comment  string `json:"comment"`
	Includes struct {
		Caps   []string `json:"caps"`
		Arches []string `json:"arches"`
	} `json:"includes"`
	Excludes struct {
		Caps   []string `json:"caps"`
		Arches []string `json:"arches"`
	} `json:"excludes"`
}

// TestBrowserSeccompProfile checks deploy/seccomp/chromium.json: without its rules
// marked "agentfy:", it is Docker's default profile to the byte of its canonical JSON
// (fails on any edit of the default part, or a rule added without the mark), and the
// marked rules are exactly the four the README explains (fails on a widened mask, a
// condition dropped, or any other call allowed).
func TestBrowserSeccompProfile(t *testing.T) {
	b, err := os.ReadFile("../" + browserSeccompProfile)
	if err != nil {
		t.Fatal(err)
	}
	var profile map[string]any
	if err := json.Unmarshal(b, &profile); err != nil {
		t.Fatal(err)
	}
	rules, _ := profile["syscalls"].([]any)
	var kept []any
	var added []seccompRule
	for _, r := range rules {
		if c, _ := r.(map[string]any)["comment"].(string); strings.HasPrefix(c, "agentfy:") {
			raw, _ := json.Marshal(r)
			var rule seccompRule
			if err := json.Unmarshal(raw, &rule); err != nil {
				t.Fatal(err)
			}
			added = append(added, rule)
			continue
		}
		kept = append(kept, r)
	}
	profile["syscalls"] = kept
	canonical, err := json.Marshal(profile)
	if err != nil {
		t.Fatal(err)
	}
	if sum := fmt.Sprintf("%x", sha256.Sum256(canonical)); sum != defaultSeccompProfileSum {
		t.Errorf("without its agentfy: rules the profile is not Docker's default (sha256 %s of its canonical JSON, want %s)", sum, defaultSeccompProfileSum)
	}
	type want struct {
		name             string
		index            uint
		mask             uint64 // 0: no condition
		arches, notArche []string
	}
	s390 := []string{"s390", "s390x"}
	wants := []want{
		{name: "clone", index: 0, mask: cloneNamespacesRefused, notArche: s390},
		{name: "clone", index: 1, mask: cloneNamespacesRefused, arches: s390},
		{name: "unshare", index: 0, mask: unshareNamespacesRefused},
		{name: "chroot"},
	}
	if len(added) != len(wants) {
		t.Fatalf("%d agentfy: rules, want %d", len(added), len(wants))
	}
	for i, w := range wants {
		r := added[i]
		if !slices.Equal(r.Names, []string{w.name}) || r.Action != "SCMP_ACT_ALLOW" || len(r.Includes.Caps) != 0 || len(r.Excludes.Caps) != 0 ||
			!slices.Equal(r.Includes.Arches, w.arches) || !slices.Equal(r.Excludes.Arches, w.notArche) {
			t.Errorf("rule %d: %+v, want %s allowed (arches %v, not %v)", i, r, w.name, w.arches, w.notArche)
			continue
		}
		if w.mask == 0 {
			if len(r.Args) != 0 {
				t.Errorf("rule %d (%s): conditions %+v", i, w.name, r.Args)
			}
			continue
		}
		if len(r.Args) != 1 || r.Args[0].Index != w.index || r.Args[0].Op != "SCMP_CMP_MASKED_EQ" || r.Args[0].Value != w.mask || r.Args[0].ValueTwo != 0 {
			t.Errorf("rule %d (%s): conditions %+v, want argument %d & %#x == 0", i, w.name, r.Args, w.index, w.mask)
		}
	}
}

// composeProject is the compose project of a running stack, from
// AGENTFY_COMPOSE_PROJECT (scripts/test-compose.sh sets it, after `up`); the tests of
// the running stack skip without it.
func composeProject(t *testing.T) string {
	t.Helper()
	p := os.Getenv("AGENTFY_COMPOSE_PROJECT")
	if p == "" {
		t.Skip("no running compose stack: scripts/test-compose.sh runs this with AGENTFY_COMPOSE_PROJECT")
	}
	return p
}

// docker runs the docker CLI and returns its standard output.
func docker(ctx context.Context, args ...string) ([]byte, error) {
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("docker %s: %w: %s", strings.Join(args[:1], " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// container is what `docker inspect` says of a container that TestRunningStackHardening reads.
type container struct {
	ID     string
	Config struct {
		Labels map[string]string
	}
	State struct {
		Running bool
		Pid     int
	}
	HostConfig struct {
		CapAdd, CapDrop, SecurityOpt []string
		Privileged, ReadonlyRootfs   bool
		Tmpfs                        map[string]string
		PidMode, IpcMode             string
		NetworkMode, UsernsMode      string
	}
}

// projectContainers inspects every container of the compose project, running or
// exited (the jobs), by service.
func projectContainers(ctx context.Context, t *testing.T, project string) map[string][]container {
	t.Helper()
	ids, err := docker(ctx, "ps", "-aq", "--filter", "label=com.docker.compose.project="+project)
	if err != nil {
		t.Fatal(err)
	}
	if len(strings.Fields(string(ids))) == 0 {
		t.Fatalf("no container of project %s", project)
	}
	out, err := docker(ctx, append([]string{"inspect"}, strings.Fields(string(ids))...)...)
	if err != nil {
		t.Fatal(err)
	}
	var all []container
	if err := json.Unmarshal(out, &all); err != nil {
		t.Fatal(err)
	}
	byService := map[string][]container{}
	for _, c := range all {
		s := c.Config.Labels["com.docker.compose.service"]
		byService[s] = append(byService[s], c)
	}
	return byService
}

// TestRunningStackHardening inspects every container of the running stack (docker
// inspect): what the engine was told is what docker-compose.yml says (the table
// hardening), and the browser's seccomp profile is the file's. Then, for each running
// container whose processes this machine's /proc shows, its first process as the
// kernel has it: no Linux capability (effective and bounding sets empty), no-new-privileges,
// seccomp filter mode. Each fails on the mutation of the compose file or of compose
// itself that checkHardening names, seen from the engine's side: e.g. a compose that
// dropped cap_drop, a profile, read_only or no-new-privileges on the way.
func TestRunningStackHardening(t *testing.T) {
	project := composeProject(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	byService := projectContainers(ctx, t, project)
	profile, err := os.ReadFile("../" + browserSeccompProfile)
	if err != nil {
		t.Fatal(err)
	}
	read := 0 // containers whose first process was read from /proc
	for name, want := range hardening {
		cs := byService[name]
		if len(cs) == 0 {
			if name != "cli" { // run --rm: gone once it has answered
				t.Errorf("no container of service %s", name)
			}
			continue
		}
		for _, c := range cs {
			h := c.HostConfig
			id := c.ID[:12]
			if !slices.Contains(h.CapDrop, "ALL") {
				t.Errorf("%s (%s): CapDrop %v lacks ALL", name, id, h.CapDrop)
			}
			if len(h.CapAdd) != len(want.capAdd) || (len(want.capAdd) > 0 && !slices.Equal(h.CapAdd, want.capAdd)) {
				t.Errorf("%s (%s): CapAdd %v, want %v", name, id, h.CapAdd, want.capAdd)
			}
			if h.Privileged {
				t.Errorf("%s (%s) is privileged", name, id)
			}
			if !h.ReadonlyRootfs {
				t.Errorf("%s (%s): root file system not read-only", name, id)
			}
			for _, mode := range []string{h.PidMode, h.IpcMode, h.NetworkMode, h.UsernsMode} {
				if mode == "host" {
					t.Errorf("%s (%s) shares a namespace of the host: %+v", name, id, h)
				}
			}
			for _, mount := range want.tmpfs {
				if _, ok := h.Tmpfs[mount]; !ok {
					t.Errorf("%s (%s): no tmpfs on %s (%v)", name, id, mount, h.Tmpfs)
				}
			}
			noNewPrivileges, seccomp := false, ""
			for _, opt := range h.SecurityOpt {
				k, v := securityOpt(opt)
				switch {
				case k == "no-new-privileges":
					noNewPrivileges = v == "" || v == "true"
				case k == "seccomp":
					seccomp = v
				case v == "unconfined" || opt == "label=disable" || opt == "label:disable":
					t.Errorf("%s (%s): security option %q", name, id, opt)
				}
			}
			if !noNewPrivileges {
				t.Errorf("%s (%s): SecurityOpt %q lacks no-new-privileges:true", name, id, h.SecurityOpt)
			}
			switch {
			case want.seccomp == "" && seccomp != "":
				t.Errorf("%s (%s): seccomp %.40q…, want Docker's default", name, id, seccomp)
			case want.seccomp != "" && !sameJSON(seccomp, string(profile)):
				t.Errorf("%s (%s): seccomp %.40q…, want the profile of %s", name, id, seccomp, want.seccomp)
			}
			if c.State.Running && c.State.Pid > 0 && checkFirstProcess(t, name, c, len(want.capAdd) > 0) {
				read++
			}
		}
	}
	for name := range byService {
		if _, ok := hardening[name]; !ok {
			t.Errorf("container of service %s, which the hardening table does not know", name)
		}
	}
	t.Logf("the first process of %d running containers read from /proc", read)
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	ca, _ := json.Marshal(va)
	cb, _ := json.Marshal(vb)
	return string(ca) == string(cb)
}

// checkFirstProcess reads a running container's first process from this machine's
// /proc (when the engine runs here: its cgroup names the container): no effective or
// bounding Linux capability unless the service adds one back, no-new-privileges, seccomp
// filter mode. It reports whether it read the process.
func checkFirstProcess(t *testing.T, name string, c container, capAdded bool) bool {
	t.Helper()
	cgroup, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", c.State.Pid))
	if err != nil || !strings.Contains(string(cgroup), c.ID) {
		t.Logf("%s: its process %d is not in this machine's /proc: not read", name, c.State.Pid)
		return false
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.State.Pid))
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return false
	}
	fields := statusFields(string(status))
	if fields["NoNewPrivs"] != "1" || fields["Seccomp"] != "2" {
		t.Errorf("%s: process %d has NoNewPrivs %q, Seccomp %q; want 1 and 2", name, c.State.Pid, fields["NoNewPrivs"], fields["Seccomp"])
	}
	if !capAdded && (strings.Trim(fields["CapEff"], "0") != "" || strings.Trim(fields["CapBnd"], "0") != "") {
		t.Errorf("%s: process %d has capabilities: effective %s, bounding %s", name, c.State.Pid, fields["CapEff"], fields["CapBnd"])
	}
	return true
}

// statusFields parses /proc/PID/status.
func statusFields(status string) map[string]string {
	f := map[string]string{}
	for _, line := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			f[k] = strings.TrimSpace(v)
		}
	}
	return f
}

// procScript prints, inside the browser's container, every process it sees: its pid,
// command line (arguments separated by \x1f, new lines as spaces), the status fields the test reads, and
// its user and PID namespaces. A process that ends meanwhile prints less and is left
// out.
const procScript = `for d in /proc/[0-9]*; do
  s=$(grep -E '^(PPid|Uid|Seccomp|Seccomp_filters|NoNewPrivs|CapEff):' "$d/status" 2>/dev/null) || continue
  printf 'pid\t%s\n' "${d#/proc/}"
  printf 'cmdline\t'; tr '\000\n' '\037 ' < "$d/cmdline" 2>/dev/null; echo
  printf '%s\n' "$s"
  printf 'userns\t%s\npidns\t%s\nend\n' "$(readlink "$d/ns/user")" "$(readlink "$d/ns/pid")"
done`

// process is one process of the browser's container, as procScript printed it.
type process struct {
	pid, ppid        int
	args             []string
	uid              string // real, effective, saved and file system uids
	seccomp, filters string
	userNS, pidNS    string
}

func (p process) kind() string {
	for _, a := range p.args {
		if t, ok := strings.CutPrefix(a, "--type="); ok {
			return t
		}
	}
	if len(p.args) > 0 && strings.HasSuffix(p.args[0], "/chromium") {
		return "browser"
	}
	if len(p.args) > 0 {
		return p.args[0]
	}
	return "?"
}

func parseProcesses(out string) []process {
	var ps []process
	var p process
	for _, line := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(line, "\t")
		switch k {
		case "pid", "cmdline", "userns", "pidns", "end":
		default: // a status line, "Name:\tvalue"
			k, v, _ = strings.Cut(line, ":")
			v = strings.TrimSpace(v)
		}
		switch k {
		case "pid":
			p = process{}
			p.pid, _ = strconv.Atoi(v) // 0, and left out, if not a number
		case "cmdline":
			// Chromium's children rewrite their command line as one string, arguments
			// separated by spaces: split on both. (An argument with a space, such as
			// --enable-crash-reporter=,built on Debian…, comes apart; none the test
			// looks for has one.)
			p.args = strings.Fields(strings.ReplaceAll(v, "\x1f", " "))
		case "PPid":
			p.ppid, _ = strconv.Atoi(v)
		case "Uid":
			p.uid = strings.Join(strings.Fields(v), " ")
		case "Seccomp":
			p.seccomp = v
		case "Seccomp_filters":
			p.filters = v
		case "userns":
			p.userNS = v
		case "pidns":
			p.pidNS = v
		case "end":
			if p.pid != 0 && p.userNS != "" && p.pidNS != "" && len(p.args) > 0 && p.args[0] != "" {
				ps = append(ps, p)
			}
		}
	}
	return ps
}

// TestRunningStackChromiumSandbox reads /proc inside the running browser container
// (docker exec, as the image's user) until Chromium has a renderer — the demo agent
// opens its pages — and checks Chromium's sandbox:
//   - no process's command line has --no-sandbox, --disable-namespace-sandbox,
//     --disable-seccomp-filter-sandbox or --single-process (fails when the broker
//     starts Chromium unsandboxed: AGENTFY_CHROMIUM_SANDBOX=off, or the flag back in
//     broker/chromium.go);
//   - no process is uid 0, the browser process included (fails with `user: root`, or
//     an image that runs the broker as root);
//   - every renderer (--type=renderer) is in seccomp filter mode with at least one filter
//     more than its browser process (Docker's filter puts every process of the
//     container in mode 2; the extra filter is Chromium's own seccomp-bpf: fails with
//     --disable-seccomp-filter-sandbox or --no-sandbox), and in a user namespace and a
//     PID namespace other than its browser process's (fails with --no-sandbox, or
//     --disable-namespace-sandbox).
//
// A container that cannot build the sandbox (Docker's default seccomp profile, no
// profile) has no renderer at all: Chromium exits with "No usable sandbox!", the broker
// with it, and the wait for a renderer fails.
func TestRunningStackChromiumSandbox(t *testing.T) {
	project := composeProject(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var id string
	for _, c := range projectContainers(ctx, t, project)["browser"] {
		if c.State.Running {
			id = c.ID
		}
	}
	if id == "" {
		t.Fatal("the browser's container is not running")
	}
	// Until a renderer exists: each round reads /proc afresh.
	// A container that is restarting (its broker exited) answers no exec: that too is
	// waited out, up to the deadline.
	deadline := time.Now().Add(2 * time.Minute)
	var ps []process
	for {
		out, err := docker(ctx, "exec", id, "bash", "-c", procScript)
		renderers := 0
		if err == nil {
			ps = parseProcesses(string(out))
			for _, p := range ps {
				if p.kind() == "renderer" {
					renderers++
				}
			}
		}
		if renderers > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no renderer in the browser's container after 2 min (last exec: %v); its processes: %+v", err, ps)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	byPID := map[int]process{}
	for _, p := range ps {
		byPID[p.pid] = p
	}
	// browserOf is the nearest ancestor of p that is a browser process.
	browserOf := func(p process) (process, bool) {
		for seen := 0; seen < 64; seen++ {
			parent, ok := byPID[p.ppid]
			if !ok {
				return process{}, false
			}
			if parent.kind() == "browser" {
				return parent, true
			}
			p = parent
		}
		return process{}, false
	}
	slices.SortFunc(ps, func(a, b process) int { return a.pid - b.pid })
	browsers := 0
	for _, p := range ps {
		t.Logf("pid %d %s: uid %s, Seccomp %s, Seccomp_filters %s, %s, %s", p.pid, p.kind(), p.uid, p.seccomp, p.filters, p.userNS, p.pidNS)
		for _, a := range p.args {
			switch a {
			case "--no-sandbox", "--disable-namespace-sandbox", "--disable-seccomp-filter-sandbox", "--single-process":
				t.Errorf("pid %d (%s) runs with %s", p.pid, p.kind(), a)
			}
		}
		for _, uid := range strings.Fields(p.uid) {
			if uid == "0" {
				t.Errorf("pid %d (%s) runs as uid 0 (%s)", p.pid, p.kind(), p.uid)
				break
			}
		}
		switch p.kind() {
		case "browser":
			browsers++
		case "renderer":
			b, ok := browserOf(p)
			if !ok {
				t.Errorf("renderer %d: no browser process among its ancestors", p.pid)
				continue
			}
			if p.seccomp != "2" {
				t.Errorf("renderer %d: Seccomp %q, want 2", p.pid, p.seccomp)
			}
			if p.filters != "" || b.filters != "" { // Linux 5.9 and later
				rf, err1 := strconv.Atoi(p.filters)
				bf, err2 := strconv.Atoi(b.filters)
				if err1 != nil || err2 != nil || rf <= bf {
					t.Errorf("renderer %d has %d seccomp filters, its browser %d %d: no filter of Chromium's own", p.pid, rf, b.pid, bf)
				}
			}
			if p.userNS == b.userNS {
				t.Errorf("renderer %d shares its browser's (%d) user namespace %s", p.pid, b.pid, p.userNS)
			}
			if p.pidNS == b.pidNS {
				t.Errorf("renderer %d shares its browser's (%d) PID namespace %s", p.pid, b.pid, p.pidNS)
			}
		}
	}
	if browsers == 0 {
		t.Error("no Chromium browser process in the browser's container")
	}
}
