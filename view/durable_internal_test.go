package view

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestConnectedReplicas(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply any
		want  int
		ok    bool
	}{
		{"master with two", []any{"master", int64(10), []any{[]any{"127.0.0.1", "7001", "10"}, []any{"127.0.0.1", "7002", "9"}}}, 2, true},
		{"master alone", []any{"master", int64(10), []any{}}, 0, true},
		{"a replica", []any{"slave", "127.0.0.1", int64(7000), "connected", int64(10)}, 0, false},
		{"garbage", "x", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := redis.NewCmd(context.Background())
			cmd.SetVal(tc.reply)
			got, err := connectedReplicas(cmd)
			if (err == nil) != tc.ok || got != tc.want {
				t.Fatalf("connectedReplicas = %d, %v; want %d, ok %v", got, err, tc.want, tc.ok)
			}
		})
	}
}
