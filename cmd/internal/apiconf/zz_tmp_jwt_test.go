package apiconf

import (
	"strings"
	"testing"
	"time"
)

func TestTmpJWTEnv(t *testing.T) {
	all := []string{"AGENTFY_JWT_JWKS_URL", "AGENTFY_JWT_DISCOVERY", "AGENTFY_JWT_ISSUER", "AGENTFY_JWT_AUDIENCE", "AGENTFY_JWT_USER_CLAIM", "AGENTFY_JWT_JWKS_MAX_STALE", "AGENTFY_JWT_PUBLIC_KEY_FILE", "AGENTFY_JWT_HS256_SECRET", "AGENTFY_JWT_HS256_SECRET_FILE"}
	const sec = "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
		check   func(t *testing.T)
	}{
		{name: "nothing", wantErr: "set one JWT key source"},
		{name: "hs256 dev defaults", env: map[string]string{"AGENTFY_JWT_HS256_SECRET": sec}},
		{name: "jwks", env: map[string]string{"AGENTFY_JWT_JWKS_URL": "https://idp/jwks", "AGENTFY_JWT_ISSUER": "https://idp", "AGENTFY_JWT_AUDIENCE": "api", "AGENTFY_JWT_USER_CLAIM": "email", "AGENTFY_JWT_JWKS_MAX_STALE": "48h"}},
		{name: "discovery", env: map[string]string{"AGENTFY_JWT_DISCOVERY": "1", "AGENTFY_JWT_ISSUER": "https://idp", "AGENTFY_JWT_AUDIENCE": "api"}},
		{name: "jwks without issuer", env: map[string]string{"AGENTFY_JWT_JWKS_URL": "https://idp/jwks", "AGENTFY_JWT_AUDIENCE": "api"}, wantErr: "required"},
		{name: "both jwks", env: map[string]string{"AGENTFY_JWT_DISCOVERY": "1", "AGENTFY_JWT_JWKS_URL": "https://idp/jwks", "AGENTFY_JWT_ISSUER": "https://idp", "AGENTFY_JWT_AUDIENCE": "api"}, wantErr: "not both"},
		{name: "jwks and hs256", env: map[string]string{"AGENTFY_JWT_HS256_SECRET": sec, "AGENTFY_JWT_JWKS_URL": "https://idp/jwks", "AGENTFY_JWT_ISSUER": "https://idp", "AGENTFY_JWT_AUDIENCE": "api"}, wantErr: "not AGENTFY_JWT_HS256_SECRET and AGENTFY_JWT_JWKS_URL"},
		{name: "discovery yes", env: map[string]string{"AGENTFY_JWT_DISCOVERY": "yes"}, wantErr: "neither 1 nor 0"},
		{name: "max stale bad", env: map[string]string{"AGENTFY_JWT_JWKS_URL": "https://idp/jwks", "AGENTFY_JWT_ISSUER": "https://idp", "AGENTFY_JWT_AUDIENCE": "api", "AGENTFY_JWT_JWKS_MAX_STALE": "soon"}, wantErr: "AGENTFY_JWT_JWKS_MAX_STALE"},
		{name: "max stale short", env: map[string]string{"AGENTFY_JWT_JWKS_URL": "https://idp/jwks", "AGENTFY_JWT_ISSUER": "https://idp", "AGENTFY_JWT_AUDIENCE": "api", "AGENTFY_JWT_JWKS_MAX_STALE": "30m"}, wantErr: "longer than"},
		{name: "max stale without jwks", env: map[string]string{"AGENTFY_JWT_HS256_SECRET": sec, "AGENTFY_JWT_JWKS_MAX_STALE": "48h"}, wantErr: "applies only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range all {
				t.Setenv(k, "")
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var warns []string
			cfg, err := JWT(func(m string) { warns = append(warns, m) })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				t.Log(err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v warns=%q", cfg, warns)
			if cfg.Leeway != 30*time.Second {
				t.Fatal("leeway")
			}
			ext, err := ExternalJWT(nil)
			t.Logf("ext %+v %v", ext, err)
		})
	}
}
