package servers

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/agentfy/agentfy/internal/dev/redisserver"
)

// HydraVersion is the Ory Hydra release internal/tools/hydra pins (its go.mod says the
// same; TestHydraBinary checks both).
const HydraVersion = "v2.3.0"

// HydraAccessTokenKeySet is the JSON Web Key Set whose newest key signs Hydra's JWT
// access tokens. Its public keys are served, beside those of the ID-token set, at
// /.well-known/jwks.json.
const HydraAccessTokenKeySet = "hydra.jwt.access-token" //nolint:gosec // a key set's name, not a credential

const (
	// HydraBuildTimeout bounds BuildHydra: a cold build took 4 min on an idle two-core
	// machine and 6 min on a busy one, and a second test process may wait for the first
	// one's build.
	HydraBuildTimeout = 15 * time.Minute
	// HydraStartTimeout bounds how long StartHydra waits for Hydra to be ready and to
	// make its keys: 0.4 s to /health/ready on an idle machine, 1.5–6 s in all on a busy
	// one.
	HydraStartTimeout = 60 * time.Second
	// hydraStopTimeout bounds the wait for a killed process to be reaped.
	hydraStopTimeout = 10 * time.Second
	// hydraRequestTimeout bounds every call the harness makes to Hydra, within the
	// caller's deadline. A call that makes an RSA-4096 key (the first JWKS or token, a
	// new RS256 key) took up to 4 s on a busy two-core machine.
	hydraRequestTimeout = 30 * time.Second
	// hydraBodyLimit bounds the answers the harness reads.
	hydraBodyLimit = 1 << 20 // 1 MiB
	// hydraLogTail is how much of Hydra's log a failing test shows.
	hydraLogTail = 8 << 10 // 8 KiB
	// hydraStartAttempts: a free port may be taken between FreePort and Hydra's bind.
	hydraStartAttempts = 3
)

// hydraBuildArgs are the go build flags of the binary: the sqlite tags, without which
// Hydra refuses DSN=memory (the driver needs CGO), and the version `hydra version`
// prints.
func hydraBuildArgs() []string {
	return []string{
		"build", "-tags", "sqlite,sqlite_omit_load_extension",
		"-ldflags", "-X github.com/ory/hydra/v2/driver/config.Version=" + HydraVersion,
	}
}

// BuildHydra returns the path of a hydra binary built from the module
// internal/tools/hydra, building it if it is missing (about 4 min cold, logged through
// logf), within HydraBuildTimeout. The binary lives in the user's cache directory
// (os.UserCacheDir()/agentfy/hydra-<version>-<hash>/hydra), the hash covering the tool
// module's go.mod, go.sum and the build flags, so a changed pin builds anew.
// Concurrent callers, in this process or another, build it once: the builder holds a
// file lock and renames a finished binary into place. A failed build returns the
// compiler's output.
func BuildHydra(ctx context.Context, logf func(format string, args ...any)) (string, error) {
	dir, err := ToolDir("hydra")
	if err != nil {
		return "", err
	}
	bin, err := toolBinaryPath(dir, "hydra", HydraVersion, hydraBuildArgs())
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, HydraBuildTimeout)
	defer cancel()
	err = buildTool(ctx, dir, bin, "github.com/ory/hydra/v2", hydraBuildArgs(), []string{"CGO_ENABLED=1", "GOWORK=off"}, "about 4 min cold", logf)
	if err != nil {
		return "", err
	}
	return bin, nil
}

// Hydra is an Ory Hydra OAuth2 and OpenID provider run by StartHydra: in memory
// (DSN=memory), in development mode (plain HTTP), with JWT access tokens, its public
// and admin APIs on loopback ports.
type Hydra struct {
	// Issuer is the iss of every token and of the discovery document.
	Issuer string
	// PublicURL serves /oauth2/token, /.well-known/openid-configuration and
	// /.well-known/jwks.json.
	PublicURL string
	// AdminURL serves /admin/clients and /admin/keys.
	AdminURL string

	// Set by StartHydra, read-only after.
	bin                   string
	publicPort, adminPort int
	systemSecret          string
	dsn                   string // "memory", or a SQLite file that survives Restart
	home, logPath         string
	client                *http.Client

	mu      sync.Mutex // guards cmd and done
	cmd     *exec.Cmd  // nil when stopped
	done    chan struct{}
	waitErr error // set before done is closed
}

// HydraOptions configure StartHydra.
type HydraOptions struct {
	// Bin is BuildHydra's binary.
	Bin string
	// Dir is a directory of the caller's that holds Hydra's home, its log and, when
	// Persistent, its database; the caller removes it after Stop.
	Dir string
	// Persistent keeps the state (clients, signing keys) in a SQLite file of Dir instead
	// of memory, so that Restart brings the same provider back, as a real one's restart
	// after an outage does: tokens issued before still verify against its JWKS. The
	// schema is made once, before the first start (`hydra migrate sql up`).
	Persistent bool
}

// StartHydra runs `hydra serve all --dev --sqa-opt-out` from o.Bin on free loopback
// ports and returns once both APIs answer /health/ready and its signing keys exist (the
// JWKS answered once), within ctx. Hydra's environment is built from scratch, so
// configuration in the caller's (a DSN, say) cannot leak in. The caller calls Stop; a
// failed start has stopped it and its error carries the tail of Hydra's log.
func StartHydra(ctx context.Context, o HydraOptions) (*Hydra, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	h := &Hydra{
		bin:          o.Bin,
		systemSecret: hex.EncodeToString(secret),
		home:         filepath.Join(o.Dir, "home"),
		logPath:      filepath.Join(o.Dir, "hydra.log"),
		client:       &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		dsn:          "memory",
	}
	if err := os.Mkdir(h.home, 0o700); err != nil {
		return nil, err
	}
	if o.Persistent {
		h.dsn = "sqlite://" + filepath.Join(o.Dir, "hydra.sqlite") + "?_fk=true"
		mctx, cancel := context.WithTimeout(ctx, HydraStartTimeout)
		cmd := exec.CommandContext(mctx, h.bin, "migrate", "sql", "up", "--read-from-env", "--yes") //nolint:gosec // the harness's hydra binary
		cmd.Env = []string{"HOME=" + h.home, "TMPDIR=" + os.TempDir(), "DSN=" + h.dsn}
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			return nil, fmt.Errorf("hydra migrate sql up: %w\n%s", err, out[max(0, len(out)-4000):])
		}
	}
	var err error
	for range hydraStartAttempts {
		sctx, cancel := context.WithTimeout(ctx, HydraStartTimeout)
		if h.publicPort, err = redisserver.FreePort(sctx); err == nil {
			if h.adminPort, err = redisserver.FreePort(sctx); err == nil {
				public := "http://127.0.0.1:" + strconv.Itoa(h.publicPort)
				h.Issuer, h.PublicURL, h.AdminURL = public, public, "http://127.0.0.1:"+strconv.Itoa(h.adminPort)
				err = h.start(sctx)
			}
		}
		cancel()
		if !errors.Is(err, errHydraExited) {
			break // ready, or a failure new ports would not cure
		}
	}
	if err != nil {
		h.Stop()
		return nil, fmt.Errorf("start hydra: %w; its log (tail):\n%s", err, h.LogTail())
	}
	return h, nil
}

// errHydraExited: the process ended before it was ready (a port taken meanwhile, say).
var errHydraExited = errors.New("hydra exited before it was ready")

// start launches the process on h's ports and waits until it is ready.
func (h *Hydra) start(ctx context.Context) error {
	log, err := os.OpenFile(h.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }() // the child has its own copy
	// The process outlives ctx (which bounds only the start); Stop ends it.
	cmd := exec.Command(h.bin, "serve", "all", "--dev", "--sqa-opt-out") //nolint:gosec,noctx // the harness's hydra binary
	cmd.Env = []string{
		"HOME=" + h.home,
		"TMPDIR=" + os.TempDir(),
		"SECRETS_SYSTEM=" + h.systemSecret,
		"DSN=" + h.dsn,
		"STRATEGIES_ACCESS_TOKEN=jwt",
		"URLS_SELF_ISSUER=" + h.Issuer,
		"SERVE_PUBLIC_HOST=127.0.0.1", "SERVE_PUBLIC_PORT=" + strconv.Itoa(h.publicPort),
		"SERVE_ADMIN_HOST=127.0.0.1", "SERVE_ADMIN_PORT=" + strconv.Itoa(h.adminPort),
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", h.bin, err)
	}
	done := make(chan struct{})
	h.mu.Lock()
	h.cmd, h.done = cmd, done
	h.mu.Unlock()
	go func() {
		err := cmd.Wait()
		h.mu.Lock()
		h.waitErr = err
		h.mu.Unlock()
		close(done)
	}()

	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for h.ready(ctx) != nil {
		select {
		case <-done:
			h.mu.Lock()
			err := h.waitErr
			h.cmd = nil
			h.mu.Unlock()
			return fmt.Errorf("%w: %v", errHydraExited, err)
		case <-ctx.Done():
			h.Stop()
			return fmt.Errorf("hydra on %s not ready: %w", h.PublicURL, ctx.Err())
		case <-tick.C:
		}
	}
	// Hydra makes its RSA-4096 signing keys (access and ID tokens) at the first request
	// that needs them, which took 0.7–6 s on a busy two-core machine: a first JWKS fetch
	// or token under a short deadline would fail. Fetch the JWKS once, so they exist.
	if _, err := h.do(ctx, http.MethodGet, h.JWKSURL(), "", nil, http.StatusOK); err != nil {
		h.Stop()
		return fmt.Errorf("hydra's first JWKS: %w", err)
	}
	return nil
}

// ready checks /health/ready on both APIs.
func (h *Hydra) ready(ctx context.Context) error {
	for _, base := range []string{h.PublicURL, h.AdminURL} {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := h.do(rctx, http.MethodGet, base+"/health/ready", "", nil, http.StatusOK)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// Pid is the running process's id, or 0 when it is stopped.
func (h *Hydra) Pid() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cmd == nil {
		return 0
	}
	return h.cmd.Process.Pid
}

// Stop kills the process group at once (SIGKILL) and waits until it is gone: the
// provider is down, its ports refuse connections. A graceful SIGTERM costs about 1.6 s
// and saves nothing (the state is in memory). Safe to call more than once.
func (h *Hydra) Stop() {
	h.mu.Lock()
	cmd, done := h.cmd, h.done
	h.cmd = nil
	h.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done: // it exited by itself: its pid may belong to someone else by now
	default:
		// The process group is Hydra's own (Setpgid): this reaches anything it started.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-done:
		case <-time.After(hydraStopTimeout):
			// Unreapable (stuck in the kernel): nothing more a test can do.
		}
	}
	h.client.CloseIdleConnections()
}

// Restart stops Hydra if it runs and starts a new process on the same ports, with the
// same issuer and system secret, within ctx. Started in memory, its state is gone, so
// this is a fresh provider: no clients (create them again) and new signing keys (new
// kids; tokens from before no longer verify against its JWKS). Started Persistent, it
// is the same provider back: the same clients and keys. It fails if the ports were
// taken meanwhile.
func (h *Hydra) Restart(ctx context.Context) error {
	h.Stop()
	ctx, cancel := context.WithTimeout(ctx, HydraStartTimeout)
	defer cancel()
	if err := h.start(ctx); err != nil {
		return fmt.Errorf("restart hydra: %w; its log (tail):\n%s", err, h.LogTail())
	}
	return nil
}

// JWKSURL is the provider's public JSON Web Key Set: the public keys of every signing
// key of both the access-token and the ID-token sets.
func (h *Hydra) JWKSURL() string { return h.PublicURL + "/.well-known/jwks.json" }

// CreateClient registers a confidential client (POST /admin/clients) that may use the
// client_credentials grant, authenticating with client_secret_post, for audience. It
// returns the secret Hydra generated. An existing clientID is refused (409).
func (h *Hydra) CreateClient(ctx context.Context, clientID, audience string) (secret string, err error) {
	body, err := json.Marshal(map[string]any{
		"client_id":                  clientID,
		"grant_types":                []string{"client_credentials"},
		"token_endpoint_auth_method": "client_secret_post",
		"audience":                   []string{audience},
	})
	if err != nil {
		return "", err
	}
	b, err := h.do(ctx, http.MethodPost, h.AdminURL+"/admin/clients", "application/json", body, http.StatusCreated)
	if err != nil {
		return "", fmt.Errorf("create client %s: %w", clientID, err)
	}
	var c struct {
		Secret string `json:"client_secret"`
	}
	if err := json.Unmarshal(b, &c); err != nil || c.Secret == "" {
		return "", fmt.Errorf("create client %s: no client_secret in %q", clientID, b)
	}
	return c.Secret, nil
}

// Token obtains an access token with the client_credentials grant (POST /oauth2/token).
// It is a JWT signed by the newest key of HydraAccessTokenKeySet, with sub = clientID,
// aud = [audience], iss = Issuer, and a lifetime of one hour.
func (h *Hydra) Token(ctx context.Context, clientID, secret, audience string) (string, error) {
	form := url.Values{
		"grant_type":    {"client_credentials"},
		"client_id":     {clientID},
		"client_secret": {secret},
		"audience":      {audience},
	}
	b, err := h.do(ctx, http.MethodPost, h.PublicURL+"/oauth2/token", "application/x-www-form-urlencoded", []byte(form.Encode()), http.StatusOK)
	if err != nil {
		return "", fmt.Errorf("token for %s: %w", clientID, err)
	}
	var t struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(b, &t); err != nil || t.AccessToken == "" {
		return "", fmt.Errorf("token for %s: no access_token in the answer", clientID)
	}
	return t.AccessToken, nil
}

// RotateKey creates a key for alg (RS256, ES256, ES512, EdDSA…; HS256 is refused) in
// HydraAccessTokenKeySet, with a kid Hydra chooses (a UUID), and returns the kid. The
// new key signs the next tokens at once; the older keys stay in the JWKS until
// DeleteKey.
func (h *Hydra) RotateKey(ctx context.Context, alg string) (kid string, err error) {
	return h.RotateKeyWithKID(ctx, alg, "")
}

// RotateKeyWithKID is RotateKey with a kid of the caller's choosing (empty: Hydra
// chooses). A kid already in the set is refused (409).
func (h *Hydra) RotateKeyWithKID(ctx context.Context, alg, kid string) (string, error) {
	req := map[string]string{"alg": alg, "use": "sig"}
	if kid != "" {
		req["kid"] = kid
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	b, err := h.do(ctx, http.MethodPost, h.AdminURL+"/admin/keys/"+HydraAccessTokenKeySet, "application/json", body, http.StatusCreated)
	if err != nil {
		return "", fmt.Errorf("create %s key: %w", alg, err)
	}
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil || len(set.Keys) != 1 || set.Keys[0].Kid == "" {
		return "", fmt.Errorf("create %s key: no kid in the answer", alg)
	}
	return set.Keys[0].Kid, nil
}

// DeleteKey removes kid from HydraAccessTokenKeySet (DELETE
// /admin/keys/hydra.jwt.access-token/{kid}): it leaves the JWKS at once, and the
// newest remaining key signs from then on (with none left, Hydra makes a new RS256 key
// at the next token). Hydra answers 204 for an unknown kid too, so neither does this
// return an error for one.
func (h *Hydra) DeleteKey(ctx context.Context, kid string) error {
	_, err := h.do(ctx, http.MethodDelete, h.AdminURL+"/admin/keys/"+HydraAccessTokenKeySet+"/"+url.PathEscape(kid), "", nil, http.StatusNoContent)
	if err != nil {
		return fmt.Errorf("delete key %s: %w", kid, err)
	}
	return nil
}

// do sends one request, within hydraRequestTimeout, and returns the body of an answer
// with status want; any other status is an error carrying the start of the body
// (Hydra's error description).
func (h *Hydra) do(ctx context.Context, method, target, contentType string, body []byte, want int) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, hydraRequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, hydraBodyLimit))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		const show = 512
		if len(b) > show {
			b = b[:show]
		}
		return nil, fmt.Errorf("%s %s: status %d: %s", method, target, resp.StatusCode, bytes.TrimSpace(b))
	}
	return b, nil
}

// LogTail is the end of Hydra's log, for a failure.
func (h *Hydra) LogTail() string {
	f, err := os.Open(h.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer func() { _ = f.Close() }()
	if fi, err := f.Stat(); err == nil && fi.Size() > hydraLogTail {
		_, _ = f.Seek(-hydraLogTail, io.SeekEnd)
	}
	b, _ := io.ReadAll(io.LimitReader(f, hydraLogTail))
	return string(b)
}
