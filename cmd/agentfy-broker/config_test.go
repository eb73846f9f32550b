package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	passFile := filepath.Join(dir, "pass")
	if err := os.WriteFile(passFile, []byte("file-pass\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(dir, "empty")
	if err := os.WriteFile(emptyFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hugeFile := filepath.Join(dir, "huge")
	if err := os.WriteFile(hugeFile, []byte(strings.Repeat("p", maxPassFileBytes+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{envAPIURL: "http://api:8080", envIPCDir: "/run/ipc", envPass: "env-pass"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}

	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		want    config
		wantErr string
	}{
		{
			name: "environment with defaults",
			env:  base,
			want: config{apiURLs: []string{"http://api:8080"}, pass: "env-pass", inlinePass: true, ipcDir: "/run/ipc", chromium: "/usr/bin/chromium", logLevel: zerolog.InfoLevel},
		},
		{
			name: "pass from a file, flags win",
			env:  with(envPass, "", envPassFile, passFile, envChromium, "/opt/chromium", envLogLevel, "debug"),
			args: []string{"-ipc-dir", "/other", "-profile-dir", "/var/lib/broker"},
			want: config{apiURLs: []string{"http://api:8080"}, pass: "file-pass", ipcDir: "/other", chromium: "/opt/chromium", profileDir: "/var/lib/broker", logLevel: zerolog.DebugLevel},
		},
		{
			name: "masks off",
			env:  with(envMask, "off"),
			want: config{apiURLs: []string{"http://api:8080"}, pass: "env-pass", inlinePass: true, ipcDir: "/run/ipc", chromium: "/usr/bin/chromium", logLevel: zerolog.InfoLevel, mask: maskConfig{off: true}},
		},
		{
			name: "more mask names",
			env:  with(envMaskAttributes, "data-secret, data-pii,", envMaskClasses, "pii"),
			args: []string{"-mask", "on"},
			want: config{apiURLs: []string{"http://api:8080"}, pass: "env-pass", inlinePass: true, ipcDir: "/run/ipc", chromium: "/usr/bin/chromium", logLevel: zerolog.InfoLevel, mask: maskConfig{attributes: []string{"data-secret", "data-pii"}, classes: []string{"pii"}}},
		},
		{
			name: "opaque frames shown",
			env:  with(envMaskOpaqueFrames, "off"),
			want: config{apiURLs: []string{"http://api:8080"}, pass: "env-pass", inlinePass: true, ipcDir: "/run/ipc", chromium: "/usr/bin/chromium", logLevel: zerolog.InfoLevel, mask: maskConfig{showFrames: true}},
		},
		{
			name: "chromium's user named, its sandbox off",
			env:  with(envChromiumUser, "browser", envChromiumSandbox, "off"),
			want: config{apiURLs: []string{"http://api:8080"}, pass: "env-pass", inlinePass: true, ipcDir: "/run/ipc", chromium: "/usr/bin/chromium", chromiumUser: "browser", noSandbox: true, logLevel: zerolog.InfoLevel},
		},
		{name: "sandbox neither on nor off", env: with(envChromiumSandbox, "false"), wantErr: `AGENTFY_CHROMIUM_SANDBOX: "false", want on or off`},
		{name: "opaque frames neither on nor off", env: with(envMaskOpaqueFrames, "yes"), wantErr: `AGENTFY_MASK_OPAQUE_FRAMES: "yes", want on or off`},
		{name: "mask neither on nor off", env: with(envMask, "no"), wantErr: `AGENTFY_MASK: "no", want on or off`},
		{name: "mask attribute not a name", env: with(envMaskAttributes, "data-x=1"), wantErr: "AGENTFY_MASK_ATTRIBUTES: \"data-x=1\" is not a name"},
		{name: "mask class with a quote", env: with(envMaskClasses, `a"b`), wantErr: "AGENTFY_MASK_CLASSES"},
		{name: "no pass", env: with(envPass, ""), wantErr: "AGENTFY_BROKER_PASS or AGENTFY_BROKER_PASS_FILE is required"},
		{name: "both passes", env: with(envPassFile, passFile), wantErr: "not both"},
		{name: "empty pass file", env: with(envPass, "", envPassFile, emptyFile), wantErr: "empty"},
		{name: "huge pass file", env: with(envPass, "", envPassFile, hugeFile), wantErr: "longer than"},
		{name: "missing pass file", env: with(envPass, "", envPassFile, filepath.Join(dir, "nope")), wantErr: "no such file"},
		{
			name: "several API URLs",
			env:  with(envAPIURL, " http://api-a:8080, https://api-b.example/base/ ,"),
			want: config{apiURLs: []string{"http://api-a:8080", "https://api-b.example/base/"}, pass: "env-pass", inlinePass: true, ipcDir: "/run/ipc", chromium: "/usr/bin/chromium", logLevel: zerolog.InfoLevel},
		},
		{
			name: "API URLs from the flag",
			env:  base,
			args: []string{"-api-url", "http://api-b:8080,http://api-a:8080"},
			want: config{apiURLs: []string{"http://api-b:8080", "http://api-a:8080"}, pass: "env-pass", inlinePass: true, ipcDir: "/run/ipc", chromium: "/usr/bin/chromium", logLevel: zerolog.InfoLevel},
		},
		{name: "no api url", env: with(envAPIURL, ""), wantErr: "AGENTFY_API_URL is required"},
		{name: "only commas", env: with(envAPIURL, " , ,"), wantErr: "AGENTFY_API_URL is required"},
		{name: "second API URL without a scheme", env: with(envAPIURL, "http://api-a:8080,api-b:8080"), wantErr: "AGENTFY_API_URL: URL 2 of 2 is not an absolute http or https URL"},
		{name: "API URL of another scheme", env: with(envAPIURL, "ws://user:hunter2@api-a:8080"), wantErr: "AGENTFY_API_URL: URL 1 of 1"},
		{name: "API URL without a host", env: with(envAPIURL, "http://api-a,https://"), wantErr: "URL 2 of 2"},
		{name: "unparsable API URL", env: with(envAPIURL, "http://[::1"), wantErr: "URL 1 of 1"},
		{name: "too many API URLs", env: with(envAPIURL, strings.Repeat("http://api,", 17)), wantErr: "more than 16 URLs"},
		{name: "no ipc dir", env: with(envIPCDir, ""), wantErr: "AGENTFY_IPC_DIR is required"},
		{name: "bad log level", env: with(envLogLevel, "loud"), wantErr: "unknown level"},
		{name: "no pass flag", env: base, args: []string{"-pass", "x"}, wantErr: "flag provided but not defined"},
		{name: "stray argument", env: base, args: []string{"serve"}, wantErr: "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := loadConfig(tt.args, func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("loadConfig() error = %v, want %q", err, tt.wantErr)
				}
				for _, secret := range []string{"env-pass", "file-pass", "hunter2"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error %q shows the pass", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("loadConfig() error = %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("loadConfig() = %+v, want %+v", got, tt.want)
			}
		})
	}
}
