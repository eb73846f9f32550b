// Package conf reads the configuration every Agentfy process shares — environment
// values, secrets, the deployment name, logging — from the environment. Only cmd/ uses
// it: packages below take plain values through their constructors. It knows nothing of
// Redis or NATS: the worker and the broker, which have no credential for either, use it
// (apiconf configures the processes that do).
package conf

import (
	"fmt"
	"os"
	"strings"
)

// Env returns the variable or def.
func Env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// Secret reads NAME or, if unset, the file named by NAME_FILE (trailing newline
// trimmed). Secrets are better passed as files: an inline one stays readable in
// /proc/<pid>/environ for the process's life whatever the process does, so Secret warns
// through warn (when not nil) when it reads one inline.
func Secret(name string, warn func(msg string)) (string, error) {
	if v := os.Getenv(name); v != "" {
		if warn != nil {
			warn(name + " holds a secret inline, where /proc/<pid>/environ keeps it; prefer " + name + "_FILE")
		}
		return v, nil
	}
	if f := os.Getenv(name + "_FILE"); f != "" {
		b, err := os.ReadFile(f) //nolint:gosec // operator-configured path
		if err != nil {
			return "", fmt.Errorf("%s_FILE: %w", name, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return "", nil
}

// Deployment is AGENTFY_DEPLOYMENT (default "dev"): it namespaces every Redis key and
// NATS subject.
func Deployment() string { return Env("AGENTFY_DEPLOYMENT", "dev") }
