// Package apiconf reads the configuration of the processes that have a role on Redis
// and NATS — the API replicas and the operator CLI — from the environment: the Redis
// and NATS connections with their role's credential, and the JWT verifier. The worker
// and the broker never import it: they have no Redis or NATS setting at all.
package apiconf

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/cmd/internal/conf"
	"github.com/agentfy/agentfy/internal/telemetry"
	"github.com/agentfy/agentfy/view"
)

// Redis builds client options from AGENTFY_REDIS_URL (redis://[user:pass@]host:port/db,
// or rediss:// for TLS), or for Sentinel and Cluster from AGENTFY_REDIS_ADDRS
// (comma-separated), AGENTFY_REDIS_MASTER (the Sentinel master name; set means Sentinel,
// several addresses without it mean Cluster; AGENTFY_REDIS_CLUSTER=1 means Cluster with
// one seed address too), AGENTFY_REDIS_DB, AGENTFY_REDIS_USERNAME,
// AGENTFY_REDIS_PASSWORD(_FILE) and AGENTFY_REDIS_TLS=1. The sentinels are asked with
// the same credential unless AGENTFY_REDIS_SENTINEL_USERNAME and
// AGENTFY_REDIS_SENTINEL_PASSWORD(_FILE) name another.
func Redis(warn func(string)) (*redis.UniversalOptions, error) {
	opts := &redis.UniversalOptions{
		DialTimeout:  2 * time.Second,
		ReadTimeout:  2 * time.Second,
		WriteTimeout: 2 * time.Second,
		// A view request fails fast with 503 rather than retrying through an outage.
		MaxRetries: 1,
		PoolSize:   64,
		// No CLIENT SETINFO on connect: the ACL users may run only what their code runs.
		DisableIdentity: true,
		// Commands and replies here are small (the largest is a session hash): 8 KiB
		// buffers instead of 64 KiB keep a burst of pooled connections from holding MiBs.
		ReadBufferSize:  8 << 10,
		WriteBufferSize: 8 << 10,
	}
	if u := os.Getenv("AGENTFY_REDIS_URL"); u != "" {
		o, err := redis.ParseURL(u)
		if err != nil {
			return nil, fmt.Errorf("AGENTFY_REDIS_URL: %w", err)
		}
		opts.Addrs, opts.DB, opts.Username, opts.Password, opts.TLSConfig = []string{o.Addr}, o.DB, o.Username, o.Password, o.TLSConfig
		return opts, nil
	}
	addrs := conf.Env("AGENTFY_REDIS_ADDRS", "127.0.0.1:6379")
	for _, a := range strings.Split(addrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			opts.Addrs = append(opts.Addrs, a)
		}
	}
	opts.MasterName = os.Getenv("AGENTFY_REDIS_MASTER")
	if db := os.Getenv("AGENTFY_REDIS_DB"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 {
			return nil, errors.New("AGENTFY_REDIS_DB: not a database number")
		}
		opts.DB = n
	}
	opts.Username = os.Getenv("AGENTFY_REDIS_USERNAME")
	pw, err := conf.Secret("AGENTFY_REDIS_PASSWORD", warn)
	if err != nil {
		return nil, err
	}
	opts.Password = pw
	opts.SentinelUsername, opts.SentinelPassword = opts.Username, opts.Password
	if u := os.Getenv("AGENTFY_REDIS_SENTINEL_USERNAME"); u != "" {
		opts.SentinelUsername = u
	}
	if spw, err := conf.Secret("AGENTFY_REDIS_SENTINEL_PASSWORD", warn); err != nil {
		return nil, err
	} else if spw != "" {
		opts.SentinelPassword = spw
	}
	opts.IsClusterMode = os.Getenv("AGENTFY_REDIS_CLUSTER") == "1"
	if opts.IsClusterMode && opts.MasterName != "" {
		return nil, errors.New("AGENTFY_REDIS_CLUSTER and AGENTFY_REDIS_MASTER: a deployment is a Cluster or a Sentinel set, not both")
	}
	if os.Getenv("AGENTFY_REDIS_TLS") == "1" {
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if (len(opts.Addrs) > 1 || opts.IsClusterMode) && opts.MasterName == "" && opts.DB != 0 {
		return nil, errors.New("AGENTFY_REDIS_DB: Redis Cluster has only database 0")
	}
	return opts, nil
}

// Namespace is the NATS namespace for the deployment and the Redis DB in use.
func Namespace(ro *redis.UniversalOptions) (bus.Namespace, error) {
	return bus.NewNamespace(conf.Deployment(), ro.DB)
}

// NATS builds the connection configuration of role in namespace ns (its inboxes live at
// ns.InboxPrefix(role), where the server lets the role read) from AGENTFY_NATS_URL
// (comma-separated servers of a cluster), AGENTFY_NATS_USER (default: the role's user,
// e.g. agentfy-replica, when a password is set) and AGENTFY_NATS_PASSWORD(_FILE),
// AGENTFY_NATS_TOKEN(_FILE), AGENTFY_NATS_NKEY_SEED_FILE, AGENTFY_NATS_CREDS_FILE, and
// AGENTFY_NATS_TLS_CA_FILE, AGENTFY_NATS_TLS_CERT_FILE, AGENTFY_NATS_TLS_KEY_FILE.
func NATS(name string, ns bus.Namespace, role bus.Role, warn func(string)) (bus.Config, error) {
	cfg := bus.Config{
		Name:         name,
		InboxPrefix:  ns.InboxPrefix(role),
		User:         os.Getenv("AGENTFY_NATS_USER"),
		NKeySeedFile: os.Getenv("AGENTFY_NATS_NKEY_SEED_FILE"),
		CredsFile:    os.Getenv("AGENTFY_NATS_CREDS_FILE"),
		TLSCAFile:    os.Getenv("AGENTFY_NATS_TLS_CA_FILE"),
		TLSCertFile:  os.Getenv("AGENTFY_NATS_TLS_CERT_FILE"),
		TLSKeyFile:   os.Getenv("AGENTFY_NATS_TLS_KEY_FILE"),
	}
	for _, s := range strings.Split(conf.Env("AGENTFY_NATS_URL", "nats://127.0.0.1:4222"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			cfg.Servers = append(cfg.Servers, s)
		}
	}
	var err error
	if cfg.Password, err = conf.Secret("AGENTFY_NATS_PASSWORD", warn); err != nil {
		return bus.Config{}, err
	}
	if cfg.Token, err = conf.Secret("AGENTFY_NATS_TOKEN", warn); err != nil {
		return bus.Config{}, err
	}
	if cfg.User == "" && cfg.Password != "" {
		cfg.User = role.User()
	}
	return cfg, nil
}

// Development JWT defaults: the dev stack and the CLI mint tokens with this issuer and
// audience. A deployment with an identity provider sets its own.
const (
	DefaultJWTIssuer   = "agentfy-dev"
	DefaultJWTAudience = "agentfy-api"
)

// jwtLeeway tolerates clock skew between the replicas and whoever issues the tokens.
const jwtLeeway = 30 * time.Second

// JWT builds the verifier configuration of the API replicas and the CLI from exactly
// one key source:
//
//   - AGENTFY_JWT_HS256_SECRET(_FILE): development tokens, signed with this secret;
//   - AGENTFY_JWT_PUBLIC_KEY_FILE: the identity provider's one PEM public key;
//   - AGENTFY_JWT_JWKS_URL or AGENTFY_JWT_DISCOVERY=1: the provider's JWK set, which it
//     may rotate (see ExternalJWT).
//
// AGENTFY_JWT_ISSUER and AGENTFY_JWT_AUDIENCE are checked in every token; they default
// to DefaultJWTIssuer and DefaultJWTAudience except with a JWK set, where both are
// required. AGENTFY_JWT_USER_CLAIM names the claim holding the user id (default sub).
func JWT(warn func(string)) (auth.JWTConfig, error) {
	ext, err := ExternalJWT(warn)
	if err != nil {
		return auth.JWTConfig{}, err
	}
	secret, err := conf.Secret("AGENTFY_JWT_HS256_SECRET", warn)
	if err != nil {
		return auth.JWTConfig{}, err
	}
	keyFile := os.Getenv("AGENTFY_JWT_PUBLIC_KEY_FILE")
	var sources []string
	if secret != "" {
		sources = append(sources, "AGENTFY_JWT_HS256_SECRET")
	}
	if keyFile != "" {
		sources = append(sources, "AGENTFY_JWT_PUBLIC_KEY_FILE")
	}
	if ext != nil && ext.Discovery {
		sources = append(sources, "AGENTFY_JWT_DISCOVERY")
	} else if ext != nil {
		sources = append(sources, "AGENTFY_JWT_JWKS_URL")
	}
	switch {
	case len(sources) == 0:
		return auth.JWTConfig{}, errors.New("set one JWT key source: AGENTFY_JWT_JWKS_URL or AGENTFY_JWT_DISCOVERY=1 (an identity provider's JWK set), AGENTFY_JWT_PUBLIC_KEY_FILE (its PEM public key), or AGENTFY_JWT_HS256_SECRET(_FILE) (development)")
	case len(sources) > 1:
		return auth.JWTConfig{}, fmt.Errorf("set one JWT key source, not %s", strings.Join(sources, " and "))
	case ext != nil:
		return *ext, nil
	}
	if os.Getenv("AGENTFY_JWT_JWKS_MAX_STALE") != "" {
		return auth.JWTConfig{}, errors.New("AGENTFY_JWT_JWKS_MAX_STALE applies only with AGENTFY_JWT_JWKS_URL or AGENTFY_JWT_DISCOVERY=1")
	}
	cfg := auth.JWTConfig{
		Issuer:    conf.Env("AGENTFY_JWT_ISSUER", DefaultJWTIssuer),
		Audience:  conf.Env("AGENTFY_JWT_AUDIENCE", DefaultJWTAudience),
		UserClaim: os.Getenv("AGENTFY_JWT_USER_CLAIM"),
		Leeway:    jwtLeeway,
	}
	if keyFile != "" {
		if cfg.PublicKey, err = auth.LoadPublicKeyPEM(keyFile); err != nil {
			return auth.JWTConfig{}, err
		}
		return cfg, nil
	}
	cfg.HS256Secret = []byte(secret)
	return cfg, nil
}

// ExternalJWT builds the configuration of an identity provider's JWK set, or returns
// nil when neither AGENTFY_JWT_JWKS_URL nor AGENTFY_JWT_DISCOVERY is set. `agentfy-dev dev`
// uses it to accept a company's tokens besides its own development ones.
//
//   - AGENTFY_JWT_JWKS_URL: the JWK set's URL;
//   - AGENTFY_JWT_DISCOVERY=1: instead, find it in the discovery document of
//     AGENTFY_JWT_ISSUER (AGENTFY_JWT_ISSUER + "/.well-known/openid-configuration");
//   - AGENTFY_JWT_ISSUER and AGENTFY_JWT_AUDIENCE (required): the provider's issuer and
//     the audience it gives tokens for this API;
//   - AGENTFY_JWT_USER_CLAIM: the claim holding the user id (default sub);
//   - AGENTFY_JWT_JWKS_MAX_STALE: how long the last keys fetched keep verifying while
//     the provider cannot be reached (a Go duration; default 24h, at least 10s); past
//     it the provider's tokens are answered 503 identity_unavailable, never 401.
func ExternalJWT(warn func(string)) (*auth.JWTConfig, error) {
	jwksURL := os.Getenv("AGENTFY_JWT_JWKS_URL")
	var discovery bool
	switch v := os.Getenv("AGENTFY_JWT_DISCOVERY"); v {
	case "", "0":
	case "1":
		discovery = true
	default:
		return nil, fmt.Errorf("AGENTFY_JWT_DISCOVERY: %q is neither 1 nor 0", v)
	}
	if jwksURL == "" && !discovery {
		return nil, nil
	}
	if jwksURL != "" && discovery {
		return nil, errors.New("set AGENTFY_JWT_JWKS_URL or AGENTFY_JWT_DISCOVERY=1, not both")
	}
	cfg := &auth.JWTConfig{
		Issuer:    os.Getenv("AGENTFY_JWT_ISSUER"),
		Audience:  os.Getenv("AGENTFY_JWT_AUDIENCE"),
		JWKSURL:   jwksURL,
		Discovery: discovery,
		UserClaim: os.Getenv("AGENTFY_JWT_USER_CLAIM"),
		Leeway:    jwtLeeway,
	}
	if cfg.Issuer == "" || cfg.Audience == "" {
		return nil, errors.New("AGENTFY_JWT_ISSUER and AGENTFY_JWT_AUDIENCE are required with AGENTFY_JWT_JWKS_URL or AGENTFY_JWT_DISCOVERY: the identity provider's issuer and the audience of its tokens for this API")
	}
	maxStale, err := conf.Duration("AGENTFY_JWT_JWKS_MAX_STALE", 0)
	if err != nil {
		return nil, fmt.Errorf("AGENTFY_JWT_JWKS_MAX_STALE: %w", err)
	}
	if maxStale != 0 && maxStale < auth.MinJWKSMaxStale {
		return nil, fmt.Errorf("AGENTFY_JWT_JWKS_MAX_STALE must be at least %s", auth.MinJWKSMaxStale)
	}
	cfg.JWKS.MaxStale = maxStale
	keysFrom := "AGENTFY_JWT_JWKS_URL"
	if discovery {
		keysFrom = "AGENTFY_JWT_ISSUER"
	}
	if u, err := url.Parse(cmp.Or(jwksURL, cfg.Issuer)); err == nil && u.Scheme == "http" && warn != nil {
		warn(keysFrom + " is plain http: anyone on the path can swap the keys; use https outside development")
	}
	return cfg, nil
}

// TrustedTraceSources reads AGENTFY_TRACE_TRUSTED_SOURCES: the addresses and CIDR
// ranges of a front end of the platform's own whose W3C trace context the replica
// continues (telemetry.ParseTrustedSources), matched against a request's peer address.
// Unset means none: a request from outside always starts a trace of the deployment's
// own.
func TrustedTraceSources() (telemetry.TrustedSources, error) {
	s, err := telemetry.ParseTrustedSources(os.Getenv("AGENTFY_TRACE_TRUSTED_SOURCES"))
	if err != nil {
		return nil, fmt.Errorf("AGENTFY_TRACE_TRUSTED_SOURCES: %w", err)
	}
	return s, nil
}

// GrantKeys reads AGENTFY_CAPABILITY_KEY(_FILE): the replicas' keys of the view
// grants' MAC (view.ParseGrantKeys), every replica of a deployment the same.
// Nil when unset: the replica then derives its key from its Redis password
// (replica.Options.GrantKeys).
func GrantKeys(warn func(string)) (view.GrantKeys, error) {
	v, err := conf.Secret("AGENTFY_CAPABILITY_KEY", warn)
	if err != nil || v == "" {
		return nil, err
	}
	keys, err := view.ParseGrantKeys(v)
	if err != nil {
		return nil, fmt.Errorf("AGENTFY_CAPABILITY_KEY: %w", err)
	}
	return keys, nil
}

// AuditBestEffort reads AGENTFY_AUDIT: "" or "durable" (the default) keeps the audit
// trail in the JetStream stream with every event acknowledged and no frame served
// unrecorded; "best-effort" publishes on core NATS unacknowledged, for a deployment
// without JetStream, which warn says (the trail cannot show it is complete).
func AuditBestEffort(warn func(string)) (bool, error) {
	switch v := os.Getenv("AGENTFY_AUDIT"); v {
	case "", "durable":
		return false, nil
	case "best-effort":
		if warn != nil {
			warn("AGENTFY_AUDIT=best-effort: audit events are published unacknowledged and frames are served whether or not the trail keeps them; the trail cannot show it is complete")
		}
		return true, nil
	default:
		return false, fmt.Errorf("AGENTFY_AUDIT=%q: want durable (the default) or best-effort", v)
	}
}
