package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/api/metrics"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/broker"
	"github.com/agentfy/agentfy/broker/masks"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/cmd/internal/apiconf"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/web"
	"github.com/agentfy/agentfy/wire"
)

// The demo: who is who in testdata/directory.json.
const (
	demoAgent    = "agent-scout"  // browses the demo site in a live session
	idleAgent    = "agent-ledger" // same team, no session
	emptyAgent   = "agent-quill"  // same team, a live session with no tab open
	foreignAgent = "agent-nova"   // another team
	memberUser   = "u-alice"
	outsiderUser = "u-carol"
	demoOrg      = "org-acme"
	otherOrg     = "org-globex"
)

// natsCredential is a NATS user and password, in the form `nats --user --password`
// takes them.
type natsCredential struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// readyFile is what --ready-file receives once everything answers.
type readyFile struct {
	Replicas []string `json:"replicas"`
	App      string   `json:"app"`
	NATS     string   `json:"nats"`
	// NATSDebug may subscribe to the namespace and publish nothing (`nats sub`);
	// NATSSystem is the system account's user (`nats server report connections`);
	// NATSOperator runs tools (`agentfy tool`); NATSAudit may subscribe to the audit
	// trail's subjects (agentfy.<deployment>.db<N>.audit.>) and read the audit stream
	// (`agentfy audit views|admin|verify`), nothing else. Each is confined to the
	// stack's namespace: its deployment and its Redis database.
	NATSDebug    natsCredential `json:"natsDebug"`
	NATSAudit    natsCredential `json:"natsAudit"`
	NATSSystem   natsCredential `json:"natsSystem"`
	NATSOperator natsCredential `json:"natsOperator"`
	// Redis is a URL with the operator's credential, as AGENTFY_REDIS_URL of the CLI.
	Redis        string            `json:"redis"`
	Deployment   string            `json:"deployment"`
	Agent        string            `json:"agent"`
	IdleAgent    string            `json:"idleAgent"`
	EmptyAgent   string            `json:"emptyAgent"`
	ForeignAgent string            `json:"foreignAgent"`
	Tokens       map[string]string `json:"tokens"`
	OrgID        string            `json:"orgId"`
	OrgKeys      map[string]string `json:"orgKeys"`
	Site         string            `json:"site"`
	SessionID    string            `json:"sessionId"`
	Metrics      []string          `json:"metrics"` // each replica's metrics listener, not its public one
	NATSMonitor  string            `json:"natsMonitor,omitempty"`
	JWTSecret    string            `json:"jwtSecret"`
	// RedisEnv points the operator CLI at the stack's Redis as the operator: KEY=value
	// pairs (what Redis says for the stack's own server only).
	RedisEnv []string  `json:"redisEnv"`
	Uses     readyUses `json:"uses"`
	// Admin is replica A's admin listener (the admin API, on loopback) and an admin key.
	Admin readyAdmin `json:"admin"`
}

// readyAdmin is where the admin API answers, and a key it takes.
type readyAdmin struct {
	URL string `json:"url"`
	Key string `json:"key"`
}

// readyUses says which servers the stack runs on: its own or external ones.
type readyUses struct {
	Redis string `json:"redis"`
	NATS  string `json:"nats"`
}

func cmdDev(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	readyPath := fs.String("ready-file", "", "write the stack's addresses and credentials as JSON to this `file` once it is ready")
	restartAfter := fs.Duration("restart-after", 10*time.Second, "start a new demo session this long after the demo session stops (0: never)")
	chromium := fs.String("chromium", os.Getenv("AGENTFY_CHROMIUM"), "Chromium `binary` (default /usr/bin/chromium)")
	verbose := fs.Bool("v", false, "log every component at debug level")
	secretsDir := fs.String("secrets", os.Getenv("AGENTFY_SECRETS_DIR"), "with servers of your own (AGENTFY_REDIS_*, AGENTFY_NATS_URL): the `directory` `agentfy secrets -out` wrote")
	mask := fs.String("mask", cmp.Or(os.Getenv("AGENTFY_MASK"), "on"), "on or off: the demo broker paints over secrets in frames (AGENTFY_MASK)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	brokerCfg := broker.DefaultConfig()
	noMask, err := masks.ParseSwitch(*mask)
	if err != nil {
		return fmt.Errorf("-mask: %w", err)
	}
	brokerCfg.NoMask = noMask
	progress := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "• "+format+"\n", a...) }
	start := time.Now()
	if err := stack.EnsureInstalled(ctx, progress); err != nil {
		return err
	}

	level := zerolog.WarnLevel
	if *verbose {
		level = zerolog.DebugLevel
	}
	log := zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05"}).Level(level).With().Timestamp().Logger()

	opts, uses, err := devStackOptions(*secretsDir, *chromium, log, progress)
	if err != nil {
		return err
	}
	progress("starting two API replicas (Redis: %s; NATS: %s)", uses.Redis, uses.NATS)
	st, err := stack.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		progress("stopping")
		st.Close()
	}()
	progress("replicas %s and %s", st.Replicas[0].URL, st.Replicas[1].URL)

	tokens, keys, err := devCredentials(ctx, st)
	if err != nil {
		return err
	}

	progress("starting a browser broker with Chromium and a worker for %s (attached to replica-b)", demoAgent)
	demo := &demoRunner{st: st, log: log, progress: progress, broker: brokerCfg}
	if err := demo.startSession(ctx); err != nil {
		return err
	}

	progress("starting a session with no tab for %s", emptyAgent)
	empty, err := st.StartSession(ctx, emptyAgent, stack.SessionOptions{Replica: 1, ImageTag: "browser-worker:dev", Broker: &brokerCfg})
	if err != nil {
		return err
	}

	rf := newReadyFile(st, uses, tokens, keys, demo.sessionID())
	// Ready means a frame can be had: wait for the first tab before saying so.
	if err := demo.waitFirstTab(ctx); err != nil {
		return err
	}
	if *readyPath != "" {
		// The ready file is for the developer and tests on this machine (mode 0600): its
		// credentials are development ones by design.
		b, _ := json.MarshalIndent(rf, "", "  ") //nolint:gosec // see above
		if err := stack.WriteFileAtomic(*readyPath, b); err != nil {
			return err
		}
	}
	printBanner(stdout, rf, st.NS, time.Since(start))

	var wg sync.WaitGroup
	wg.Go(func() { demo.run(ctx, *restartAfter) })
	wg.Go(func() { keepBusy(ctx, empty, log) })
	<-ctx.Done()
	wg.Wait()
	return nil
}

// devStackOptions are the local stack's options: its own servers, or those of the
// environment with the secrets in secretsDir (externalServers), and a company's identity
// provider (AGENTFY_JWT_JWKS_URL or AGENTFY_JWT_DISCOVERY=1, with its issuer and
// audience), accepted besides the stack's own development tokens. uses says which
// servers, for the ready file.
func devStackOptions(secretsDir, chromium string, log zerolog.Logger, progress func(string, ...any)) (stack.Options, readyUses, error) {
	uses := readyUses{Redis: "its own redis-server", NATS: "embedded"}
	ext, err := externalServers(secretsDir)
	if err != nil {
		return stack.Options{}, uses, err
	}
	// Traces go where the standard OTEL_* variables say (off unless an endpoint or
	// exporter is set), each part under its own service.name.
	opts := stack.Options{Chromium: chromium, WebApp: web.Files(), Log: log, Traces: os.Getenv}
	provider, err := apiconf.ExternalJWT(func(msg string) { log.Warn().Msg(msg) })
	if err != nil {
		return stack.Options{}, uses, err
	}
	if provider != nil {
		opts.ExtraJWT = []auth.JWTConfig{*provider}
		progress("accepting tokens of %s besides the development ones", provider.Issuer)
	}
	if ext != nil {
		opts.Secrets, opts.NATSServers = ext.secrets, ext.nats
		if ext.redis != nil {
			opts.Redis, opts.RedisDB = ext.redis, ext.redisDB
			uses.Redis = "external " + ext.redis.Kind + " " + strings.Join(ext.redis.Addrs, ",")
		}
		if ext.nats != nil {
			uses.NATS = "external " + strings.Join(ext.nats, ",")
		}
	}
	return opts, uses, nil
}

// devCredentials mints the ready file's development tokens (a member of the demo
// agent's team, an outsider) and organisation keys (one that may read, one without the
// scope, one of another organisation).
func devCredentials(ctx context.Context, st *stack.Stack) (tokens, keys map[string]string, err error) {
	tokens = map[string]string{}
	for name, user := range map[string]string{"member": memberUser, "outsider": outsiderUser} {
		if tokens[name], err = st.Token(user, 12*time.Hour); err != nil {
			return nil, nil, err
		}
	}
	keys = map[string]string{}
	for name, k := range map[string]struct {
		org    string
		scopes []string
	}{
		"reader":   {demoOrg, []string{auth.ScopeWorkerLogsRead}},
		"noScope":  {demoOrg, []string{"agents:read"}},
		"otherOrg": {otherOrg, []string{auth.ScopeWorkerLogsRead}},
	} {
		if keys[name], _, err = st.Creds.CreateOrgKey(ctx, k.org, "production", k.scopes); err != nil {
			return nil, nil, err
		}
	}
	return tokens, keys, nil
}

// newReadyFile is what the ready file says of the running stack.
func newReadyFile(st *stack.Stack, uses readyUses, tokens, keys map[string]string, sessionID string) readyFile {
	rf := readyFile{
		Replicas: []string{st.Replicas[0].URL, st.Replicas[1].URL}, App: st.Replicas[0].URL + "/",
		NATS: strings.Join(st.NATSURLs(), ","), Redis: st.RedisURL(deploy.RedisOperator), Deployment: st.NS.Deployment(),
		RedisEnv: st.RedisEnv(deploy.RedisOperator), Uses: uses,
		NATSDebug:    natsCred(st, bus.RoleDebug),
		NATSAudit:    natsCred(st, bus.RoleAudit),
		NATSSystem:   natsCred(st, bus.RoleSystem),
		NATSOperator: natsCred(st, bus.RoleOperator),
		Agent:        demoAgent, IdleAgent: idleAgent, EmptyAgent: emptyAgent, ForeignAgent: foreignAgent, Tokens: tokens,
		OrgID: demoOrg, OrgKeys: keys, Site: st.Site, SessionID: sessionID,
		Metrics:   []string{st.Replicas[0].MetricsURL + metrics.Path, st.Replicas[1].MetricsURL + metrics.Path},
		JWTSecret: string(st.Secret),
		Admin:     readyAdmin{URL: st.Replicas[0].AdminURL, Key: st.AdminKey},
	}
	if st.NATS != nil {
		rf.NATSMonitor = "http://" + st.NATS.MonitorAddr().String()
	}
	return rf
}

// keepBusy has the tab-less agent list its tabs now and then, as a working agent would,
// so its session does not reach the idle timeout.
func keepBusy(ctx context.Context, empty *stack.Session, log zerolog.Logger) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := empty.Tool(ctx, wire.ToolTabs, struct{}{}); err != nil {
				log.Warn().Err(err).Msg("demo: empty agent")
			}
		}
	}
}

// redisSummary says which Redis the stack uses, without a password.
func redisSummary(rf readyFile) string {
	if rf.Redis != "" {
		if p, err := url.Parse(rf.Redis); err == nil {
			return p.Host
		}
	}
	return rf.Uses.Redis
}

// shellEnv quotes KEY=value pairs for an export line, leaving out empty values.
func shellEnv(env []string) string {
	var out []string
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && v != "" {
			out = append(out, k+"='"+strings.ReplaceAll(v, "'", `'\''`)+"'")
		}
	}
	return strings.Join(out, " ")
}

func natsCred(st *stack.Stack, r bus.Role) natsCredential {
	return natsCredential{User: r.User(), Password: st.Secrets.NATS[r]}
}

// printBanner says how to use the stack of rf. Its NATS subjects are those of ns, the
// stack's namespace (its deployment and Redis database), the only ones the debug and
// audit users may read.
func printBanner(w io.Writer, rf readyFile, ns bus.Namespace, took time.Duration) {
	fmt.Fprintf(w, `
Agentfy browser view is running (ready in %.1fs). Ctrl-C stops everything.

  Web app        %s#/agents/%s/worker?token=%s
                 (the token travels in the URL fragment, which browsers never send to a
                 server; the page moves it into the tab's session storage at once)
  API replicas   %s  %s   (admin API %s)
  Metrics        %s  %s   (Prometheus, no credential)
  NATS           %s   (monitoring %s)
  Redis          %s   deployment %q (users agentfy-replica, agentfy-operator)
  Demo agent     %s, browsing %s; %s has a session with no tab; %s has none

In another terminal:

  export TOKEN='%s'   # u-alice, team Atlas
  export ORG_KEY='%s'   # org-acme, worker:logs:read

  # the agent's browser as JSON (human JWT), then as a JPEG file
  curl -sS -H "Authorization: Bearer $TOKEN" %s/v1/agents/%s/worker/view | head -c 300; echo
  curl -sS -H "Authorization: Bearer $TOKEN" %s/v1/agents/%s/worker/view \
    | python3 -c 'import sys,json,base64; p=json.load(sys.stdin)["page"]; open("frame.jpg","wb").write(base64.b64decode(p["data"])); print(p["title"], p["url"])'

  # the partner route (organisation key)
  curl -sS -H "Authorization: Bearer $ORG_KEY" %s/v1/orgs/%s/agents/%s/worker/view | head -c 300; echo

  # everything on NATS is request ids and ciphertext (go install github.com/nats-io/natscli/nats@v0.5.0);
  # the debug user may watch the namespace and publish nothing
  nats --server %s --user %s --password '%s' sub '%s'
  # the audit trail, one JSON event per view decision and admin change (the audit user
  # may read it and nothing else)
  nats --server %s --user %s --password '%s' sub '%s'
  # who is connected, as which user (the system account)
  nats --server %s --user %s --password '%s' server report connections

  # the admin API (replica A's admin listener; admin keys only): make u-dave a member of
  # team Atlas, then list org-acme's keys (ids only, never secrets)
  export ADMIN_KEY='%s'
  curl -sS -X PUT -H "Authorization: Bearer $ADMIN_KEY" %s/v1/admin/teams/team-atlas/members/u-dave -w '%%{http_code}\n'
  curl -sS -H "Authorization: Bearer $ADMIN_KEY" %s/v1/admin/orgs/%s/keys; echo

  # a tool call as the operator, then stop the demo session (the web app shows
  # "Браузер закрыт"; a new session starts 10 s later)
  export %s AGENTFY_NATS_URL='%s' AGENTFY_NATS_PASSWORD='%s'
  go run ./cmd/agentfy tool -agent %s -name browser_tabs
  go run ./cmd/agentfy session stop -agent %s
`, took.Seconds(), rf.App, rf.Agent, rf.Tokens["member"], rf.Replicas[0], rf.Replicas[1], rf.Admin.URL, rf.Metrics[0], rf.Metrics[1], rf.NATS, rf.NATSMonitor, redisSummary(rf), rf.Deployment,
		rf.Agent, rf.Site, rf.EmptyAgent, rf.IdleAgent,
		rf.Tokens["member"], rf.OrgKeys["reader"],
		rf.Replicas[0], rf.Agent, rf.Replicas[0], rf.Agent,
		rf.Replicas[0], rf.OrgID, rf.Agent,
		rf.NATS, rf.NATSDebug.User, rf.NATSDebug.Password, ns.Wildcard(),
		rf.NATS, rf.NATSAudit.User, rf.NATSAudit.Password, ns.AuditWildcard(),
		rf.NATS, rf.NATSSystem.User, rf.NATSSystem.Password,
		rf.Admin.Key, rf.Admin.URL, rf.Admin.URL, rf.OrgID,
		shellEnv(rf.RedisEnv), rf.NATS, rf.NATSOperator.Password, rf.Agent, rf.Agent)
}

// demoRunner keeps a demo session alive: it browses the demo site through tool calls
// (several tabs, browser_play steps), and starts a new session after the old one stops.
type demoRunner struct {
	st       *stack.Stack
	log      zerolog.Logger
	progress func(string, ...any)
	broker   broker.Config // the demo sessions' broker

	mu   sync.Mutex
	sess *stack.Session // guarded by mu
}

func (d *demoRunner) sessionID() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sess.ID
}

func (d *demoRunner) startSession(ctx context.Context) error {
	ss, err := d.st.StartSession(ctx, demoAgent, stack.SessionOptions{Replica: 1, ImageTag: "browser-worker:dev", Broker: &d.broker})
	if err != nil {
		return err
	}
	d.mu.Lock()
	old := d.sess
	d.sess = ss
	d.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

func (d *demoRunner) current() *stack.Session {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sess
}

// waitFirstTab opens the first tab of the demo site.
func (d *demoRunner) waitFirstTab(ctx context.Context) error {
	_, err := d.current().Tool(ctx, wire.ToolOpen, map[string]string{"url": d.st.Site + "/"})
	return err
}

// run browses until ctx ends; when the session stops, it waits restartAfter and starts
// a new one (as the platform does when new work arrives).
func (d *demoRunner) run(ctx context.Context, restartAfter time.Duration) {
	for ctx.Err() == nil {
		d.browse(ctx)
		if ctx.Err() != nil || restartAfter == 0 {
			return
		}
		d.progress("demo session stopped; a new one starts in %s", restartAfter)
		select {
		case <-ctx.Done():
			return
		case <-time.After(restartAfter):
		}
		if err := d.startSession(ctx); err != nil {
			d.log.Error().Err(err).Msg("start demo session")
			continue
		}
		if err := d.waitFirstTab(ctx); err != nil {
			d.log.Warn().Err(err).Msg("demo: first tab")
		}
		d.progress("new demo session %s", d.sessionID())
	}
}

// browse plays the demo script until the session ends.
func (d *demoRunner) browse(ctx context.Context) {
	ss := d.current()
	alive := func(ctx context.Context) bool {
		cur, err := d.st.Sess.Get(ctx, ss.ID)
		return err != nil || d.st.Sess.Status(cur) != session.Stopped
	}
	browseDemo(ctx, ss.Tool, d.st.Site, alive, d.log)
}
