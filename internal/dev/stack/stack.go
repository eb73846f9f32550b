// Package stack starts the whole system on one machine: a redis-server, an embedded NATS
// server, N API replicas, a demo website, and per session a browser broker with its own
// Chromium plus a worker. The development command, the bench and the test harness
// (internal/test/stacktest, for the integration tests and the reliability suite) all
// use it, so what is tested is what runs.
package stack

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/channel"
	"github.com/agentfy/agentfy/deploy"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/internal/dev/natsserver"
	"github.com/agentfy/agentfy/internal/dev/redisserver"
	"github.com/agentfy/agentfy/internal/redisclient"
	"github.com/agentfy/agentfy/internal/replica"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/keyspace"
	"github.com/agentfy/agentfy/openapi"
	"github.com/agentfy/agentfy/session"
	"github.com/agentfy/agentfy/view"
)

// Options configure a stack. The zero value starts two replicas with the shipped seed.
type Options struct {
	Replicas   int    // 0 means 2; negative, none (the caller runs its own: the capacity bench)
	Deployment string // empty means "dev"
	RedisDB    int
	// Root is the repository root (for testdata/); empty means found from the working
	// directory.
	Root string
	// Chromium is the browser binary; empty means the broker's default.
	Chromium string
	Policy   session.Policy
	// Tick: see channel.Config.
	Tick   time.Duration
	WebApp fs.FS
	Log    zerolog.Logger
	// JetStreamDir is where the embedded NATS server keeps its JetStream store, which
	// holds the audit trail's stream (the stack makes it, audit.Stream); empty means a
	// temporary directory the stack removes. A platform's user with every right in the
	// deployment's account reaches it (ConnectPlatform).
	JetStreamDir string
	// AuditBestEffort runs the replicas with AGENTFY_AUDIT=best-effort: for NATSServers
	// without JetStream.
	AuditBestEffort bool
	// NATSServers, when set, replaces the embedded NATS server (a cluster the caller
	// runs, configured with deploy.NATSConfig and Secrets); replica i connects to
	// NATSServers[i % len].
	NATSServers []string
	// Secrets are the role passwords the servers are configured with; nil means fresh
	// ones.
	Secrets *deploy.Secrets
	// PersistRedis lets StopRedis and RestartRedis keep the data (fault tests).
	PersistRedis bool
	// BrokerBin is the agentfy-broker binary for sessions started with BrokerProcess.
	BrokerBin string
	// Redis, when set, replaces the stack's own redis-server: a Cluster or Sentinel set
	// (or a server) the caller runs, configured with deploy.RedisACL and Secrets.
	Redis *RedisTarget
	// ExtraJWT are token sources the replicas accept besides the stack's own
	// development tokens (a company's identity provider, a test's JWKS).
	ExtraJWT []auth.JWTConfig
	// Traces reads the OTEL_* variables of the stack's traces (os.Getenv for the
	// development command; a test's own endpoint): each replica, the workers and the
	// brokers get a TracerProvider of their own, named agentfy-api, agentfy-worker and
	// agentfy-broker whatever OTEL_SERVICE_NAME says. Nil means tracing off.
	Traces func(string) string
}

// RedisTarget is a Redis deployment the stack uses instead of starting its own.
type RedisTarget struct {
	// Addrs are the server, the Cluster's seed nodes, or the sentinels.
	Addrs []string
	// MasterName is the Sentinel master's name; empty otherwise.
	MasterName string
	// Cluster says Addrs are Cluster nodes (also when there is one).
	Cluster bool
	// Kind names it in logs and the dev stack's ready file: "cluster", "sentinel",
	// "server".
	Kind string
	// Admin, when set, is an administrator of the servers (every key and command): the
	// harness's OpenGate needs one, as no role may touch a view's gate and paces but
	// the replicas, which may not SCAN.
	Admin *redisserver.Admin
}

// Stack is a running system.
type Stack struct {
	opts        Options
	admin       *redisserver.Admin    // nil on a Redis the harness does not administer
	adminClient redis.UniversalClient // logged in as admin
	Root        string
	Redis       *redisserver.Server
	NATS        *server.Server // nil with Options.NATSServers
	Secret      []byte         // the development JWT secret
	NS          bus.Namespace
	Site        string // base URL of the demo website
	LB          string // a load balancer over the replicas (what brokers are configured with)

	Replicas []*Replica
	// Secrets are every role's passwords: the servers know only their hashes.
	Secrets deploy.Secrets
	// GrantKeys are the replicas' grant keys (view.GrantKeys), random.
	GrantKeys view.GrantKeys
	// Client is the harness's Redis client, logged in as the operator (it seeds, starts
	// and stops sessions, and inspects keys as the operator CLI may). Bus is a NATS
	// connection with the replica role (tests play a replica, or an attacker holding a
	// replica's credential, through it); Operator one with the operator role (tool calls,
	// as the CLI and the demo agent make them).
	Client   redis.UniversalClient
	Bus      *nats.Conn
	Operator *nats.Conn
	Dir      *directory.Store
	Creds    *auth.Store
	Sess     *session.Store
	Seed     directory.Seed
	// AdminKey opens the replicas' admin listeners (Replica.AdminURL).
	AdminKey string

	mu       sync.Mutex
	sessions []*Session // guarded by mu
	closers  []func()
	natsPort int
	natsOpts natsserver.Options // the embedded server's, as it was started (a reload must repeat them)
	natsURLs []string

	// The traces of the workers and brokers (one provider each, set by Start) and of
	// each replica (by StartReplica); disabled providers with Options.Traces nil.
	workerTraces, brokerTraces *telemetry.Provider
	replicaTraces              []*telemetry.Provider // guarded by mu

	consumeHook atomic.Pointer[func()] // called by the balancer before it forwards a consume
	// relayAhead is how far the replicas' relay clock (relayClock) runs ahead of time.Now,
	// in nanoseconds; it only grows.
	relayAhead atomic.Int64
}

// StopRedis stops the Redis server, keeping its data when Options.PersistRedis. With
// Options.Redis there is no server of the stack's own: it panics.
func (s *Stack) StopRedis() { s.Redis.Halt() }

// RestartRedis starts Redis again on the same port.
func (s *Stack) RestartRedis(ctx context.Context) error {
	n, err := s.Redis.Restart(ctx)
	if err != nil {
		return err
	}
	s.Redis = n
	return nil
}

// StopNATS shuts the embedded NATS server down.
func (s *Stack) StopNATS() {
	s.NATS.Shutdown()
	s.NATS.WaitForShutdown()
}

// RestartNATS starts the embedded NATS server again on the same port; clients reconnect
// on their own.
func (s *Stack) RestartNATS() error {
	o := s.natsOpts
	o.Port = s.natsPort
	n, err := natsserver.Run(o)
	if err != nil {
		return err
	}
	s.NATS, s.natsOpts = n, o
	return nil
}

// SetConsumeHook installs f to run each time a broker's consume request passes the
// balancer, that is in the middle of a capture (nil removes it).
func (s *Stack) SetConsumeHook(f func()) {
	if f == nil {
		s.consumeHook.Store(nil)
		return
	}
	s.consumeHook.Store(&f)
}

// Replica is one running API replica.
type Replica struct {
	*replica.Replica
	ID  string
	URL string
	// AdminURL is the replica's admin listener (the admin API), on loopback.
	AdminURL string
	// MetricsURL is the replica's metrics listener, on loopback: its series at
	// MetricsURL + "/metrics" (metrics.Path), which URL does not serve.
	MetricsURL string
	cancel     context.CancelFunc
	done       chan error
	ln         net.Listener
	hooks      *atomic.Pointer[Hooks] // SetHooks; the wrappers of the replica's collaborators read it

	stopOnce sync.Once
	stopErr  error
}

// FindRoot walks up from the working directory to the directory holding go.mod.
func FindRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("stack: run this from the repository (it needs testdata/): go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Start starts everything but sessions. On error, what started is stopped.
func Start(ctx context.Context, o Options) (_ *Stack, err error) {
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	if o.Deployment == "" {
		o.Deployment = "dev"
	}
	s := &Stack{opts: o}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.Root = o.Root; s.Root == "" {
		if s.Root, err = FindRoot(); err != nil {
			return nil, err
		}
	}
	if s.NS, err = bus.NewNamespace(o.Deployment, o.RedisDB); err != nil {
		return nil, err
	}
	if err := s.makeSecrets(); err != nil {
		return nil, err
	}
	if err := s.startServers(ctx); err != nil {
		return nil, err
	}
	if err := s.connect(); err != nil {
		return nil, err
	}
	if err := s.seed(ctx); err != nil {
		return nil, err
	}
	if err := s.startSite(ctx); err != nil {
		return nil, err
	}
	if err := s.startBalancer(ctx); err != nil {
		return nil, err
	}
	if s.workerTraces, err = s.traces(ctx, telemetry.ServiceWorker, ""); err != nil {
		return nil, err
	}
	if s.brokerTraces, err = s.traces(ctx, telemetry.ServiceBroker, ""); err != nil {
		return nil, err
	}
	for i := range max(o.Replicas, 0) {
		if _, err := s.StartReplica(ctx, i, s.natsURLs[i%len(s.natsURLs)]); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// traces sets up the traces of one part (telemetry.Setup with Options.Traces), shut
// down when the stack closes.
func (s *Stack) traces(ctx context.Context, service, instance string) (*telemetry.Provider, error) {
	if s.opts.Traces == nil {
		return &telemetry.Provider{}, nil
	}
	p, err := telemetry.Setup(ctx, telemetry.Config{Service: service, Instance: instance, Shared: true, Getenv: s.opts.Traces})
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() { _ = p.Shutdown(context.WithoutCancel(ctx)) })
	return p, nil
}

// BrokerTracerProvider is the TracerProvider of the stack's brokers, nil when tracing is
// off: for a harness that builds a broker of its own (the bench), so that its spans go
// where a session's broker's would.
func (s *Stack) BrokerTracerProvider() trace.TracerProvider { return s.brokerTraces.TracerProvider() }

// FlushTraces exports the spans every part of the stack has ended, within ctx: a test
// reads a view's trace back from the backend once this returns.
func (s *Stack) FlushTraces(ctx context.Context) error {
	s.mu.Lock()
	providers := append([]*telemetry.Provider{s.workerTraces, s.brokerTraces}, s.replicaTraces...)
	s.mu.Unlock()
	var errs []error
	for _, p := range providers {
		errs = append(errs, p.ForceFlush(ctx))
	}
	return errors.Join(errs...)
}

// makeSecrets makes the stack's development JWT secret, its replicas' grant key
// and, unless the options bring them, the role credentials of its servers.
func (s *Stack) makeSecrets() (err error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	s.Secret = []byte(base64.RawURLEncoding.EncodeToString(secret))
	grantKey := make([]byte, view.GrantKeyBytes)
	if _, err := rand.Read(grantKey); err != nil {
		return err
	}
	s.GrantKeys = view.GrantKeys{grantKey}
	if s.opts.Secrets != nil {
		s.Secrets = *s.opts.Secrets
	} else if s.Secrets, err = deploy.GenerateSecrets(); err != nil {
		return err
	}
	return nil
}

// startServers starts the stack's own redis-server, with the deployment's users and the
// harness's administrator, and its embedded NATS server, unless the options name
// servers of their own.
func (s *Stack) startServers(ctx context.Context) (err error) {
	o := s.opts
	acl, err := deploy.RedisACL(s.NS, s.Secrets)
	if err != nil {
		return err
	}
	if o.Redis == nil {
		// The harness's own administrator, beside the deployment's users: OpenGate.
		pw := make([]byte, 32)
		if _, err := rand.Read(pw); err != nil {
			return err
		}
		s.admin = &redisserver.Admin{User: "agentfy-harness", Password: base64.RawURLEncoding.EncodeToString(pw)}
		acl += s.admin.ACLLine() + "\n"
	} else {
		s.admin = o.Redis.Admin
	}
	if o.Redis == nil {
		if s.Redis, err = redisserver.Start(ctx, redisserver.Options{Persist: o.PersistRedis, ACL: acl}); err != nil {
			return err
		}
		s.closers = append(s.closers, func() { s.Redis.Stop() })
	} else if o.Redis.Cluster && o.RedisDB != 0 {
		return errors.New("stack: Redis Cluster has only database 0")
	}
	s.natsURLs = o.NATSServers
	if len(s.natsURLs) == 0 {
		cfg, err := deploy.NATSConfig(s.NS, s.Secrets)
		if err != nil {
			return err
		}
		s.natsOpts = natsserver.Options{Name: "agentfy-dev", Port: -1, MonitorPort: -1, Config: cfg, Log: &s.opts.Log}
		storeDir := o.JetStreamDir
		if storeDir == "" {
			if storeDir, err = os.MkdirTemp("", "agentfy-jetstream-"); err != nil {
				return err
			}
			s.closers = append(s.closers, func() { _ = os.RemoveAll(storeDir) })
		}
		pw := make([]byte, 32)
		if _, err := rand.Read(pw); err != nil {
			return err
		}
		s.natsOpts.JetStream = &natsserver.JetStream{
			StoreDir: storeDir, Account: deploy.NATSAccount, User: PlatformUser, Password: base64.RawURLEncoding.EncodeToString(pw),
		}
		if s.NATS, err = natsserver.Run(s.natsOpts); err != nil {
			return err
		}
		s.closers = append(s.closers, func() { s.NATS.Shutdown(); s.NATS.WaitForShutdown() })
		s.natsPort = s.NATS.Addr().(*net.TCPAddr).Port
		s.natsURLs = []string{s.NATS.ClientURL()}
		if err := s.MakeAuditStream(ctx); err != nil {
			return err
		}
	}
	return nil
}

// connect opens the harness's clients: Redis as the operator (and as its
// administrator, when it has one), NATS as a replica and as the operator.
func (s *Stack) connect() (err error) {
	s.Client = redisclient.New(s.RedisOptions(deploy.RedisOperator))
	s.closers = append(s.closers, func() { _ = s.Client.Close() })
	if s.admin != nil {
		ao := s.RedisOptions(deploy.RedisOperator)
		ao.Username, ao.Password = s.admin.User, s.admin.Password
		ao.SentinelUsername, ao.SentinelPassword = s.admin.User, s.admin.Password
		s.adminClient = redisclient.New(ao)
		s.closers = append(s.closers, func() { _ = s.adminClient.Close() })
	}
	if s.Bus, err = s.ConnectNATS(bus.RoleReplica, "agentfy-harness"); err != nil {
		return err
	}
	s.closers = append(s.closers, s.Bus.Close)
	if s.Operator, err = s.ConnectNATS(bus.RoleOperator, "agentfy-operator"); err != nil {
		return err
	}
	s.closers = append(s.closers, s.Operator.Close)
	return nil
}

// seed opens the stores, loads testdata/directory.json into the directory and creates
// the stack's admin key.
func (s *Stack) seed(ctx context.Context) (err error) {
	o := s.opts
	s.Creds = auth.NewStore(s.Client, o.Deployment, nil)
	s.Dir = directory.NewStore(s.Client, o.Deployment)
	s.Sess = session.NewStore(s.Client, s.Creds, o.Deployment, o.Policy, nil)
	f, err := os.Open(filepath.Join(s.Root, "testdata", "directory.json"))
	if err != nil {
		return err
	}
	s.Seed, err = directory.ParseSeed(f)
	_ = f.Close()
	if err != nil {
		return err
	}
	if err := s.Dir.Load(ctx, s.Seed); err != nil {
		return err
	}
	s.AdminKey, _, err = s.Creds.CreateAdminKey(ctx, "the stack")
	return err
}

// RedisOptions are client options for the stack's Redis, logged in as user
// (deploy.RedisReplica or deploy.RedisOperator), to the sentinels too.
func (s *Stack) RedisOptions(user string) *redis.UniversalOptions {
	o := &redis.UniversalOptions{
		DB:       s.opts.RedisDB,
		Username: user, Password: s.Secrets.Redis[user],
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		MaxRetries: 1, PoolSize: 64, DisableIdentity: true,
		ReadBufferSize: 8 << 10, WriteBufferSize: 8 << 10, // as cmd/internal/apiconf
	}
	if t := s.opts.Redis; t != nil {
		o.Addrs, o.MasterName, o.IsClusterMode = t.Addrs, t.MasterName, t.Cluster
		o.SentinelUsername, o.SentinelPassword = user, s.Secrets.Redis[user]
	} else {
		o.Addrs = []string{s.Redis.Addr()}
	}
	return o
}

// RedisKind is "server" for the stack's own redis-server, else Options.Redis.Kind.
func (s *Stack) RedisKind() string {
	if s.opts.Redis == nil {
		return "server"
	}
	return s.opts.Redis.Kind
}

// RedisURL is a redis:// URL of the stack's own Redis with user's credential, as the
// operator CLI takes it in AGENTFY_REDIS_URL; "" with Options.Redis (see RedisEnv).
func (s *Stack) RedisURL(user string) string {
	if s.opts.Redis != nil {
		return ""
	}
	u := url.URL{Scheme: "redis", User: url.UserPassword(user, s.Secrets.Redis[user]), Host: s.Redis.Addr(), Path: "/" + strconv.Itoa(s.opts.RedisDB)}
	return u.String()
}

// RedisEnv is the environment that points a process (the CLI, a replica) at the
// stack's Redis as user: KEY=value pairs of cmd/internal/apiconf.Redis.
func (s *Stack) RedisEnv(user string) []string {
	if s.opts.Redis == nil {
		return []string{"AGENTFY_REDIS_URL=" + s.RedisURL(user)}
	}
	return s.opts.Redis.Env(user, s.Secrets.Redis[user], s.opts.RedisDB)
}

// Env is the environment that points a process at t as user: KEY=value pairs of
// cmd/internal/apiconf.Redis (every AGENTFY_REDIS_ variable, so none is left over).
func (t *RedisTarget) Env(user, password string, db int) []string {
	cluster := ""
	if t.Cluster {
		cluster = "1"
	}
	return []string{
		"AGENTFY_REDIS_URL=",
		"AGENTFY_REDIS_ADDRS=" + strings.Join(t.Addrs, ","),
		"AGENTFY_REDIS_USERNAME=" + user,
		"AGENTFY_REDIS_PASSWORD=" + password,
		"AGENTFY_REDIS_DB=" + strconv.Itoa(db),
		"AGENTFY_REDIS_MASTER=" + t.MasterName,
		"AGENTFY_REDIS_CLUSTER=" + cluster,
	}
}

// NATSURLs are the NATS servers the stack's processes connect to.
func (s *Stack) NATSURLs() []string { return s.natsURLs }

// NATSConfig is the connection configuration of role on the stack's NATS.
func (s *Stack) NATSConfig(role bus.Role, name string) bus.Config {
	return bus.Config{
		Servers: s.natsURLs, Name: name, InboxPrefix: s.NS.InboxPrefix(role),
		User: role.User(), Password: s.Secrets.NATS[role],
	}
}

// PlatformUser is the embedded NATS server's user of a platform (Options.JetStreamDir).
const PlatformUser = "platform"

// ConnectPlatform connects to the embedded NATS server as the platform's user, with
// every right in the deployment's account (Options.JetStreamDir); the caller closes it.
func (s *Stack) ConnectPlatform(name string) (*nats.Conn, error) {
	js := s.natsOpts.JetStream
	if js == nil {
		return nil, errors.New("stack: no JetStream (Options.JetStreamDir)")
	}
	return bus.Connect(bus.Config{Servers: s.natsURLs, Name: name, User: js.User, Password: js.Password}, s.opts.Log)
}

// AuditStreamMaxBytes bounds the development stack's audit stream: its store lives in
// a temporary directory, and JetStream reserves a stream's whole limit on the disk.
const AuditStreamMaxBytes = 256 << 20

// MakeAuditStream makes the audit stream on the embedded server, as a platform does
// (the stack does at its start; a test that deleted it makes it again).
func (s *Stack) MakeAuditStream(ctx context.Context) error {
	nc, err := s.ConnectPlatform("agentfy-dev audit stream")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cfg := audit.Stream(s.NS)
	cfg.MaxBytes = AuditStreamMaxBytes
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		return fmt.Errorf("stack: audit stream: %w", err)
	}
	return nil
}

// ReconfigureNATS reloads the embedded NATS server with its configuration as edit
// changes it (a role's permissions, say); connected clients keep their connections
// under the new rules.
func (s *Stack) ReconfigureNATS(edit func(*server.Options)) error {
	if s.NATS == nil {
		return errors.New("stack: no embedded NATS server")
	}
	return natsserver.Reload(s.NATS, s.natsOpts, edit)
}

// ConnectNATS connects to the stack's NATS with role's credential; the caller closes it.
func (s *Stack) ConnectNATS(role bus.Role, name string) (*nats.Conn, error) {
	return bus.Connect(s.NATSConfig(role, name), s.opts.Log)
}

// relayRefill is the time a connection's relay pace takes to fill from empty
// (channel.RelayBurst at channel.RelayRate).
const relayRefill = time.Duration(float64(channel.RelayBurst) / float64(channel.RelayRate) * float64(time.Second))

// relayClock is the clock of every replica's relay pace (channel.Config.RelayClock): the
// time, moved ahead by refillRelayPaces.
func (s *Stack) relayClock() time.Time { return time.Now().Add(time.Duration(s.relayAhead.Load())) }

// refillRelayPaces fills the relay pace of every replica's connections, as if each had
// been quiet for a while: it moves the relay clock ahead by relayRefill, and no other
// clock (sessions, events and the gate keep the real time).
func (s *Stack) refillRelayPaces() { s.relayAhead.Add(int64(relayRefill)) }

// OpenGateFor is OpenGate for one caller (api.UserCaller, api.KeyCaller): it deletes
// the agent's gate and that caller's pace by name, in one command, where OpenGate scans
// for every caller's pace (a scan as long as the keyspace, which the bench's CPU
// windows would count).
func (s *Stack) OpenGateFor(ctx context.Context, agentID, caller string) error {
	if s.adminClient == nil {
		return errNoAdmin
	}
	s.refillRelayPaces()
	k := keyspace.For(s.opts.Deployment)
	return s.adminClient.Del(ctx, k.Gate(agentID), k.Pace(agentID, caller)).Err()
}

// AdminClient is a Redis client logged in as the harness's administrator (every key and
// command), for what no role of the deployment may do: read or write a view's keys as
// an attacker with Redis would, read every key. Nil on a Redis the harness does not
// administer (RedisTarget.Admin unset).
func (s *Stack) AdminClient() redis.UniversalClient { return s.adminClient }

// errNoAdmin is OpenGate on a Redis the harness does not administer.
var errNoAdmin = errors.New("stack: no Redis administrator to open a gate with (RedisTarget.Admin)")

// OpenGate stands for the time between two polls of a client that respects the gate:
// it clears the agent's 2-s gate and every caller's pace for it in Redis, and refills
// every replica's relay pace (refillRelayPaces), so a test may view again at once.
func (s *Stack) OpenGate(ctx context.Context, agentID string) error {
	if s.adminClient == nil {
		return errNoAdmin
	}
	s.refillRelayPaces()
	keys := []string{keyspace.For(s.opts.Deployment).Gate(agentID)}
	// The gate and the paces share the agent's hash tag: one slot, one master.
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, keyspace.For(s.opts.Deployment).PacePattern(agentID), 100).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		return iter.Err()
	}
	var err error
	if cc, ok := s.adminClient.(*redis.ClusterClient); ok {
		var master *redis.Client
		if master, err = cc.MasterForKey(ctx, keys[0]); err == nil {
			err = scan(ctx, master)
		}
	} else {
		err = scan(ctx, s.adminClient)
	}
	if err != nil {
		return err
	}
	return s.adminClient.Del(ctx, keys...).Err()
}

// JWTConfig is the verifier configuration the replicas use.
func (s *Stack) JWTConfig() auth.JWTConfig {
	return auth.JWTConfig{Issuer: "agentfy-dev", Audience: "agentfy-api", HS256Secret: s.Secret, Leeway: 30 * time.Second}
}

// Token mints a development JWT for userID.
func (s *Stack) Token(userID string, ttl time.Duration) (string, error) {
	c := s.JWTConfig()
	return auth.MintHS256(c.HS256Secret, c.Issuer, c.Audience, userID, time.Now(), ttl)
}

// StartReplica starts replica number i (replica-a, replica-b, …) on a free port and
// connects it to natsURL. It can be called again for an index whose replica stopped.
func (s *Stack) StartReplica(ctx context.Context, i int, natsURL string) (*Replica, error) {
	return s.StartReplicaWith(ctx, i, natsURL, nil)
}

// StartReplicaWith starts replica number i as StartReplica does, with its options as
// edit changes them just before the replica is built: one replica unlike the stack's
// others (AuditBestEffort beside durable ones, say). A nil edit changes nothing.
func (s *Stack) StartReplicaWith(ctx context.Context, i int, natsURL string, edit func(*replica.Options)) (*Replica, error) {
	id := fmt.Sprintf("replica-%c", 'a'+i)
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	log := s.opts.Log.With().Str("replica", id).Logger()
	natsCfg := s.NATSConfig(bus.RoleReplica, "agentfy-api "+id)
	natsCfg.Servers = []string{natsURL}
	hooks := new(atomic.Pointer[Hooks])
	views, hub := s.hooked(hooks)
	traces, err := s.traces(ctx, telemetry.ServiceAPI, id)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	s.mu.Lock()
	s.replicaTraces = append(s.replicaTraces, traces)
	s.mu.Unlock()
	o := replica.Options{
		ReplicaID: id, Deployment: s.opts.Deployment, Redis: s.RedisOptions(deploy.RedisReplica),
		NATS: natsCfg, JWT: append([]auth.JWTConfig{s.JWTConfig()}, s.opts.ExtraJWT...),
		Policy: s.opts.Policy, Tick: s.opts.Tick, GrantKeys: s.GrantKeys,
		OpenAPI: openapi.Document, WebApp: s.opts.WebApp, Log: log, DrainTimeout: 10 * time.Second,
		Views: views, Hub: hub, Tracer: traces.TracerProvider(), AuditBestEffort: s.opts.AuditBestEffort,
	}
	if edit != nil {
		edit(&o)
	}
	r, err := replica.New(ctx, o)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	adminLn, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	metricsLn, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		_ = ln.Close()
		_ = adminLn.Close()
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h := &Replica{
		Replica: r, ID: id, URL: "http://" + ln.Addr().String(), AdminURL: "http://" + adminLn.Addr().String(),
		MetricsURL: "http://" + metricsLn.Addr().String(),
		cancel:     cancel, done: make(chan error, 1), ln: ln, hooks: hooks,
	}
	// As agentfy-api serves them: a replica that stopped serving stops its admin and
	// metrics listeners too.
	go func() { h.done <- r.ServeAll(rctx, replica.Listeners{Public: ln, Admin: adminLn, Metrics: metricsLn}) }()
	s.mu.Lock()
	for len(s.Replicas) <= i {
		s.Replicas = append(s.Replicas, nil)
	}
	s.Replicas[i] = h
	s.mu.Unlock()
	return h, nil
}

// Stop shuts the replica down gracefully and waits for it. It may be called again.
func (r *Replica) Stop() error {
	r.stopOnce.Do(func() {
		r.cancel()
		r.stopErr = <-r.done
	})
	return r.stopErr
}

// startSite serves testdata/site on a loopback port: the pages the demo agent browses.
func (s *Stack) startSite(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(filepath.Join(s.Root, "testdata", "site"))), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	s.Site = "http://" + ln.Addr().String()
	s.closers = append(s.closers, func() { _ = srv.Close() })
	return nil
}

// OnClose makes Close call f after everything of the stack's own has stopped: the
// servers its caller started for it (a Redis Cluster or Sentinel set).
func (s *Stack) OnClose(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closers = append([]func(){f}, s.closers...)
}

// Close stops sessions, replicas and servers, newest first.
func (s *Stack) Close() {
	s.mu.Lock()
	sessions := s.sessions
	s.sessions = nil
	replicas := s.Replicas
	s.mu.Unlock()
	for _, ss := range sessions {
		ss.Close()
	}
	var wg sync.WaitGroup
	for _, r := range replicas {
		if r != nil {
			wg.Go(func() { _ = r.Stop() })
		}
	}
	wg.Wait()
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// ViewRequest is a view request of requestID for sessionID as a replica of this stack
// sends it on NATS: the id, and the replica's proof in its header (view.Grants.Proof).
// Tests that speak NATS as a replica, or as an attacker holding a replica's credential
// and its grant key, send it.
func (s *Stack) ViewRequest(sessionID, requestID string) (*nats.Msg, error) {
	subject, err := s.NS.Subject(bus.VerbView, sessionID)
	if err != nil {
		return nil, err
	}
	proof, err := view.NewGrants(nil, s.NS.Deployment(), s.GrantKeys, 0).Proof(requestID, sessionID, time.Now())
	if err != nil {
		return nil, err
	}
	return &nats.Msg{Subject: subject, Data: []byte(requestID), Header: nats.Header{bus.HeaderProof: {proof}}}, nil
}
