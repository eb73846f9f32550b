package apiconf

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestJWT: exactly one key source; a JWK set needs its issuer and audience; each
// setting lands where the verifier reads it, and a bad one is a clear error.
func TestJWT(t *testing.T) {
	vars := []string{"AGENTFY_JWT_HS256_SECRET", "AGENTFY_JWT_HS256_SECRET_FILE", "AGENTFY_JWT_PUBLIC_KEY_FILE", "AGENTFY_JWT_JWKS_URL",
		"AGENTFY_JWT_DISCOVERY", "AGENTFY_JWT_ISSUER", "AGENTFY_JWT_AUDIENCE", "AGENTFY_JWT_USER_CLAIM", "AGENTFY_JWT_JWKS_MAX_STALE"}
	const secret = "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
		check   func(t *testing.T, iss, aud, jwks, claim string, discovery bool, maxStale time.Duration, hs bool)
	}{
		{name: "nothing", env: nil, wantErr: "set one JWT key source"},
		{name: "development secret", env: map[string]string{"AGENTFY_JWT_HS256_SECRET": secret},
			check: func(t *testing.T, iss, aud, jwks, _ string, _ bool, _ time.Duration, hs bool) {
				if !hs || iss != DefaultJWTIssuer || aud != DefaultJWTAudience || jwks != "" {
					t.Errorf("iss %q aud %q jwks %q hs %v", iss, aud, jwks, hs)
				}
			}},
		{name: "a JWK set", env: map[string]string{"AGENTFY_JWT_JWKS_URL": "https://idp.example.com/jwks", "AGENTFY_JWT_ISSUER": "https://idp.example.com",
			"AGENTFY_JWT_AUDIENCE": "agentfy-api", "AGENTFY_JWT_USER_CLAIM": "email", "AGENTFY_JWT_JWKS_MAX_STALE": "48h"},
			check: func(t *testing.T, iss, aud, jwks, claim string, discovery bool, maxStale time.Duration, hs bool) {
				if iss != "https://idp.example.com" || aud != "agentfy-api" || jwks != "https://idp.example.com/jwks" || claim != "email" || discovery || maxStale != 48*time.Hour || hs {
					t.Errorf("iss %q aud %q jwks %q claim %q discovery %v stale %v hs %v", iss, aud, jwks, claim, discovery, maxStale, hs)
				}
			}},
		{name: "discovery", env: map[string]string{"AGENTFY_JWT_DISCOVERY": "1", "AGENTFY_JWT_ISSUER": "https://idp.example.com", "AGENTFY_JWT_AUDIENCE": "agentfy-api"},
			check: func(t *testing.T, iss, _, jwks, _ string, discovery bool, _ time.Duration, _ bool) {
				if !discovery || jwks != "" || iss != "https://idp.example.com" {
					t.Errorf("discovery %v jwks %q iss %q", discovery, jwks, iss)
				}
			}},
		{name: "a JWK set without its issuer", env: map[string]string{"AGENTFY_JWT_JWKS_URL": "https://idp.example.com/jwks", "AGENTFY_JWT_AUDIENCE": "a"}, wantErr: "AGENTFY_JWT_ISSUER and AGENTFY_JWT_AUDIENCE are required"},
		{name: "two sources", env: map[string]string{"AGENTFY_JWT_HS256_SECRET": secret, "AGENTFY_JWT_JWKS_URL": "https://x/jwks", "AGENTFY_JWT_ISSUER": "i", "AGENTFY_JWT_AUDIENCE": "a"}, wantErr: "not AGENTFY_JWT_HS256_SECRET and AGENTFY_JWT_JWKS_URL"},
		{name: "a JWK set and discovery", env: map[string]string{"AGENTFY_JWT_DISCOVERY": "1", "AGENTFY_JWT_JWKS_URL": "https://x/jwks", "AGENTFY_JWT_ISSUER": "i", "AGENTFY_JWT_AUDIENCE": "a"}, wantErr: "not both"},
		{name: "discovery neither 1 nor 0", env: map[string]string{"AGENTFY_JWT_DISCOVERY": "yes"}, wantErr: "neither 1 nor 0"},
		{name: "a ten-second staleness bound", env: map[string]string{"AGENTFY_JWT_JWKS_URL": "https://x/jwks", "AGENTFY_JWT_ISSUER": "i", "AGENTFY_JWT_AUDIENCE": "a", "AGENTFY_JWT_JWKS_MAX_STALE": "10s"},
			check: func(t *testing.T, _, _, _, _ string, _ bool, maxStale time.Duration, _ bool) {
				if maxStale != 10*time.Second {
					t.Errorf("stale %v, want 10s", maxStale)
				}
			}},
		{name: "staleness under ten seconds", env: map[string]string{"AGENTFY_JWT_JWKS_URL": "https://x/jwks", "AGENTFY_JWT_ISSUER": "i", "AGENTFY_JWT_AUDIENCE": "a", "AGENTFY_JWT_JWKS_MAX_STALE": "9s"}, wantErr: "at least 10s"},
		{name: "staleness that is not a duration", env: map[string]string{"AGENTFY_JWT_JWKS_URL": "https://x/jwks", "AGENTFY_JWT_ISSUER": "i", "AGENTFY_JWT_AUDIENCE": "a", "AGENTFY_JWT_JWKS_MAX_STALE": "a day"}, wantErr: "AGENTFY_JWT_JWKS_MAX_STALE"},
		{name: "staleness without a JWK set", env: map[string]string{"AGENTFY_JWT_HS256_SECRET": secret, "AGENTFY_JWT_JWKS_MAX_STALE": "48h"}, wantErr: "applies only with"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, v := range vars {
				t.Setenv(v, tt.env[v])
			}
			cfg, err := JWT(nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, cfg.Issuer, cfg.Audience, cfg.JWKSURL, cfg.UserClaim, cfg.Discovery, cfg.JWKS.MaxStale, cfg.HS256Secret != nil)
		})
	}
}

// TestExternalJWTIsNilWithoutAProvider: `agentfy-dev dev` adds a provider only when one is
// configured, and warns when its keys would travel over plain http.
func TestExternalJWTIsNilWithoutAProvider(t *testing.T) {
	t.Setenv("AGENTFY_JWT_JWKS_URL", "")
	t.Setenv("AGENTFY_JWT_DISCOVERY", "")
	if cfg, err := ExternalJWT(nil); cfg != nil || err != nil {
		t.Fatalf("no provider: %+v %v", cfg, err)
	}
	t.Setenv("AGENTFY_JWT_JWKS_URL", "http://idp.internal/jwks")
	t.Setenv("AGENTFY_JWT_ISSUER", "http://idp.internal")
	t.Setenv("AGENTFY_JWT_AUDIENCE", "agentfy-api")
	var warned []string
	cfg, err := ExternalJWT(func(m string) { warned = append(warned, m) })
	if err != nil || cfg == nil || cfg.JWKSURL != "http://idp.internal/jwks" {
		t.Fatalf("provider: %+v %v", cfg, err)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "plain http") {
		t.Errorf("warnings %q, want one about plain http", warned)
	}
}

// TestGrantKeys: unset is nil (the replica derives its key), a key or a list of
// keys from the variable or its file, and anything else a clear error.
func TestGrantKeys(t *testing.T) {
	k := strings.Repeat("A", 43)
	file := t.TempDir() + "/capability-key"
	if err := os.WriteFile(file, []byte(k+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		env     map[string]string
		keys    int
		wantErr string
	}{
		{"unset", nil, 0, ""},
		{"one key", map[string]string{"AGENTFY_CAPABILITY_KEY": k}, 1, ""},
		{"a rotation", map[string]string{"AGENTFY_CAPABILITY_KEY": k + "," + k}, 2, ""},
		{"a file", map[string]string{"AGENTFY_CAPABILITY_KEY_FILE": file}, 1, ""},
		{"too short", map[string]string{"AGENTFY_CAPABILITY_KEY": "abc"}, 0, "AGENTFY_CAPABILITY_KEY: view: a grant key is 32 bytes"},
		{"a missing file", map[string]string{"AGENTFY_CAPABILITY_KEY_FILE": file + ".missing"}, 0, "AGENTFY_CAPABILITY_KEY_FILE"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("AGENTFY_CAPABILITY_KEY", "")
			t.Setenv("AGENTFY_CAPABILITY_KEY_FILE", "")
			for name, v := range tt.env {
				t.Setenv(name, v)
			}
			keys, err := GrantKeys(func(string) {})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(keys) != tt.keys {
				t.Fatalf("%d keys, %v; want %d", len(keys), err, tt.keys)
			}
		})
	}
}

// TestTrustedTraceSources: unset trusts no front end; a list of addresses and ranges is
// read; a bad one is an error that names the variable.
func TestTrustedTraceSources(t *testing.T) {
	for _, tt := range []struct {
		name    string
		value   string
		want    string // the sources, comma-separated
		wantErr string
	}{
		{name: "unset", value: "", want: ""},
		{name: "a range and an address", value: "10.0.4.0/24, 10.0.5.7", want: "10.0.4.0/24,10.0.5.7/32"},
		{name: "every address", value: "0.0.0.0/0", wantErr: "AGENTFY_TRACE_TRUSTED_SOURCES: telemetry: trusted sources"},
		{name: "a host name", value: "proxy.internal", wantErr: "AGENTFY_TRACE_TRUSTED_SOURCES"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("AGENTFY_TRACE_TRUSTED_SOURCES", tt.value)
			got, err := TrustedTraceSources()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, p := range got {
				s = append(s, p.String())
			}
			if strings.Join(s, ",") != tt.want {
				t.Errorf("sources %v, want %s", s, tt.want)
			}
		})
	}
}
