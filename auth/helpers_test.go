package auth_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/internal/dev/redisserver"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// assertNotInRedis scans every key and value of DB 0 for needle.
func assertNotInRedis(t *testing.T, _ *auth.Store, srv *redisserver.Server, needle string) {
	t.Helper()
	rdb := testenv.RedisClient(t, srv, 0)
	ctx := testenv.Context(t, 10*time.Second)
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("no keys to scan")
	}
	for _, k := range keys {
		if strings.Contains(k, needle) {
			t.Fatalf("key %q holds the secret", k)
		}
		vals := map[string]string{}
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "hash":
			vals, err = rdb.HGetAll(ctx, k).Result()
		case "set":
			var members []string
			members, err = rdb.SMembers(ctx, k).Result()
			for _, m := range members {
				vals[m] = ""
			}
		default:
			t.Fatalf("key %q is a %s: scan it too", k, typ)
		}
		if err != nil {
			t.Fatal(err)
		}
		for f, v := range vals {
			if strings.Contains(f, needle) || strings.Contains(v, needle) {
				t.Fatalf("key %q field %q holds the secret", k, f)
			}
		}
	}
}
