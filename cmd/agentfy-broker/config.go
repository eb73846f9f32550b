package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/broker"
	"github.com/agentfy/agentfy/broker/egress"
	"github.com/agentfy/agentfy/broker/masks"
)

// maxPassFileBytes bounds the pass file.
const maxPassFileBytes = 4 << 10 // 4 KiB

// Environment variables. Every flag mirrors one; the flag wins. The pass has
// no flag: a command line is visible to every process on the machine.
const (
	envAPIURL   = "AGENTFY_API_URL"
	envPass     = "AGENTFY_BROKER_PASS"      //nolint:gosec // a variable's name, not a credential
	envPassFile = "AGENTFY_BROKER_PASS_FILE" //nolint:gosec // a variable's name, not a credential
	envIPCDir   = "AGENTFY_IPC_DIR"
	envChromium = "AGENTFY_CHROMIUM"
	// envChromiumUser is the account a root broker starts Chromium as (default
	// broker.DefaultChromiumUser); envChromiumSandbox is on (the default) or off.
	envChromiumUser    = "AGENTFY_CHROMIUM_USER"
	envChromiumSandbox = "AGENTFY_CHROMIUM_SANDBOX"
	// envBrowserAllow is the operator's allow-list of non-public addresses the agent's
	// browser may reach (egress.Parse): none by default.
	envBrowserAllow = "AGENTFY_BROWSER_ALLOW"
	envProfileDir   = "AGENTFY_BROKER_PROFILE_DIR"
	envLogLevel     = "AGENTFY_LOG_LEVEL"
	// envMask is on (the default) or off: whether frames are masked
	// (docs/privacy-masks.md). envMaskAttributes and envMaskClasses are the deployment's
	// own attribute and class names that mark an element private, comma separated.
	envMask           = "AGENTFY_MASK"
	envMaskAttributes = "AGENTFY_MASK_ATTRIBUTES"
	envMaskClasses    = "AGENTFY_MASK_CLASSES"
	// envMaskOpaqueFrames is on (the default) or off: whether a frame the broker cannot
	// read into is masked whole.
	envMaskOpaqueFrames = "AGENTFY_MASK_OPAQUE_FRAMES"
)

// config is the broker process's configuration.
type config struct {
	apiURLs    []string // tried in turn for each redemption
	pass       string
	inlinePass bool // the pass came in the environment (see run's warning)
	ipcDir     string
	chromium   string
	// chromiumUser is whom a root broker starts Chromium as; noSandbox is the
	// operator's AGENTFY_CHROMIUM_SANDBOX=off.
	chromiumUser string
	noSandbox    bool
	// egress is where the agent's browser may go.
	egress     egress.Policy
	profileDir string
	logLevel   zerolog.Level
	mask       maskConfig
}

// maskConfig is what the broker masks.
type maskConfig struct {
	off        bool
	attributes []string
	classes    []string
	showFrames bool // opaque frames unmasked
}

// loadConfig reads the configuration from args (without the program name)
// and the environment. It rejects a missing API URL, IPC directory or pass,
// an API URL that is not absolute http(s), a pass given both inline and as a
// file, and an unknown log level.
func loadConfig(args []string, getenv func(string) string) (config, error) {
	fs := flag.NewFlagSet("agentfy-broker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	apiURL := fs.String("api-url", getenv(envAPIURL), "API replicas, comma separated and tried in turn, or a load balancer ($"+envAPIURL+")")
	passFile := fs.String("pass-file", getenv(envPassFile), "file holding the broker pass ($"+envPassFile+"; or $"+envPass+")")
	ipcDir := fs.String("ipc-dir", getenv(envIPCDir), "IPC directory shared with the worker ($"+envIPCDir+")")
	chromium := fs.String("chromium", or(getenv(envChromium), broker.DefaultChromium), "Chromium executable ($"+envChromium+")")
	chromiumUser := fs.String("chromium-user", getenv(envChromiumUser), "the user a root broker starts Chromium as, default "+broker.DefaultChromiumUser+" ($"+envChromiumUser+")")
	sandbox := fs.String("chromium-sandbox", or(getenv(envChromiumSandbox), "on"), "on or off: Chromium's sandbox; off is not safe for the open internet ($"+envChromiumSandbox+")")
	browserAllow := fs.String("browser-allow", getenv(envBrowserAllow), "non-public addresses, ranges or host:port the agent's browser may reach, comma separated ($"+envBrowserAllow+")")
	profileDir := fs.String("profile-dir", getenv(envProfileDir), "parent of the private Chromium profile, default $TMPDIR ($"+envProfileDir+")")
	logLevel := fs.String("log-level", or(getenv(envLogLevel), "info"), "debug, info, warn or error ($"+envLogLevel+")")
	mask := fs.String("mask", or(getenv(envMask), "on"), "on or off: paint over secrets in frames ($"+envMask+")")
	maskAttributes := fs.String("mask-attributes", getenv(envMaskAttributes), "more attributes that mark an element private, comma separated ($"+envMaskAttributes+")")
	maskClasses := fs.String("mask-classes", getenv(envMaskClasses), "more classes that mark an element private, comma separated ($"+envMaskClasses+")")
	maskFrames := fs.String("mask-opaque-frames", or(getenv(envMaskOpaqueFrames), "on"), "on or off: mask whole a frame the broker cannot read into ($"+envMaskOpaqueFrames+")")
	if err := fs.Parse(args); err != nil {
		return config{}, fmt.Errorf("flags: %w", err)
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("flags: unexpected argument %q", fs.Arg(0))
	}

	c := config{ipcDir: *ipcDir, chromium: *chromium, chromiumUser: *chromiumUser, profileDir: *profileDir}
	var errs []error
	var err error
	if c.noSandbox, err = masks.ParseSwitch(*sandbox); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", envChromiumSandbox, err))
	}
	if c.egress, err = egress.Parse(*browserAllow); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", envBrowserAllow, err))
	}
	if c.apiURLs, err = parseAPIURLs(*apiURL); err != nil {
		errs = append(errs, err)
	}
	if c.ipcDir == "" {
		errs = append(errs, fmt.Errorf("%s is required", envIPCDir))
	}
	level, err := zerolog.ParseLevel(*logLevel)
	if err != nil || level == zerolog.NoLevel {
		errs = append(errs, fmt.Errorf("%s: unknown level %q", envLogLevel, *logLevel))
	}
	c.logLevel = level
	if c.mask.off, err = masks.ParseSwitch(*mask); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", envMask, err))
	}
	if c.mask.attributes, err = masks.ParseNames(*maskAttributes); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", envMaskAttributes, err))
	}
	if c.mask.classes, err = masks.ParseNames(*maskClasses); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", envMaskClasses, err))
	}
	if c.mask.showFrames, err = masks.ParseSwitch(*maskFrames); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", envMaskOpaqueFrames, err))
	}
	switch inline := getenv(envPass); {
	case inline != "" && *passFile != "":
		errs = append(errs, fmt.Errorf("set %s or %s, not both", envPass, envPassFile))
	case inline != "":
		c.pass = inline
		c.inlinePass = true
	case *passFile != "":
		pass, err := readPass(*passFile)
		if err != nil {
			errs = append(errs, err)
		}
		c.pass = pass
	default:
		errs = append(errs, fmt.Errorf("%s or %s is required", envPass, envPassFile))
	}
	if err := errors.Join(errs...); err != nil {
		return config{}, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// parseAPIURLs splits the comma-separated API URLs, ignoring blanks. It
// rejects an empty list, more than broker.MaxConsumeURLs, and a URL that is not
// absolute http or https; its errors name a URL by its position only (a URL
// may carry credentials).
func parseAPIURLs(s string) ([]string, error) {
	var urls []string
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	switch {
	case len(urls) == 0:
		return nil, fmt.Errorf("%s is required", envAPIURL)
	case len(urls) > broker.MaxConsumeURLs:
		return nil, fmt.Errorf("%s: more than %d URLs", envAPIURL, broker.MaxConsumeURLs)
	}
	for i, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%s: URL %d of %d is not an absolute http or https URL", envAPIURL, i+1, len(urls))
		}
	}
	return urls, nil
}

// readPass reads the pass file, at most maxPassFileBytes, without its
// trailing newline.
func readPass(path string) (string, error) {
	f, err := os.Open(path) //nolint:gosec // the operator names the file
	if err != nil {
		return "", fmt.Errorf("%s: %w", envPassFile, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPassFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("%s: %w", envPassFile, err)
	}
	if len(b) > maxPassFileBytes {
		return "", fmt.Errorf("%s: longer than %d bytes", envPassFile, maxPassFileBytes)
	}
	pass := strings.TrimRight(string(b), "\r\n")
	if pass == "" {
		return "", fmt.Errorf("%s: empty", envPassFile)
	}
	return pass, nil
}

func or(v, def string) string {
	if v != "" {
		return v
	}
	return def
}
