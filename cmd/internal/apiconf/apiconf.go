// Package apiconf reads the configuration of the processes that have a role on Redis
// and NATS — the API replicas and the operator CLI — from the environment: the Redis
// and NATS connections with their role's credential, and the JWT verifier. The worker
// and the broker never import it: they have no Redis or NATS setting at all.
package apiconf

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/cmd/internal/conf"
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
// audience. Production sets AGENTFY_JWT_PUBLIC_KEY_FILE and its own issuer/audience.
const (
	DefaultJWTIssuer   = "agentfy-dev"
	DefaultJWTAudience = "agentfy-api"
)

// JWT builds the verifier configuration from AGENTFY_JWT_ISSUER, AGENTFY_JWT_AUDIENCE
// and either AGENTFY_JWT_PUBLIC_KEY_FILE (production) or
// AGENTFY_JWT_HS256_SECRET(_FILE) (development).
func JWT(warn func(string)) (auth.JWTConfig, error) {
	cfg := auth.JWTConfig{
		Issuer:   conf.Env("AGENTFY_JWT_ISSUER", DefaultJWTIssuer),
		Audience: conf.Env("AGENTFY_JWT_AUDIENCE", DefaultJWTAudience),
		Leeway:   30 * time.Second,
	}
	if f := os.Getenv("AGENTFY_JWT_PUBLIC_KEY_FILE"); f != "" {
		k, err := auth.LoadPublicKeyPEM(f)
		if err != nil {
			return auth.JWTConfig{}, err
		}
		cfg.PublicKey = k
		return cfg, nil
	}
	s, err := conf.Secret("AGENTFY_JWT_HS256_SECRET", warn)
	if err != nil {
		return auth.JWTConfig{}, err
	}
	if s == "" {
		return auth.JWTConfig{}, errors.New("set AGENTFY_JWT_PUBLIC_KEY_FILE (production) or AGENTFY_JWT_HS256_SECRET (development)")
	}
	cfg.HS256Secret = []byte(s)
	return cfg, nil
}
