package view

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestMasterRole(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reply  any
		want   int
		offset int64
		ok     bool
	}{
		{"master with two", []any{"master", int64(10), []any{[]any{"127.0.0.1", "7001", "10"}, []any{"127.0.0.1", "7002", "9"}}}, 2, 10, true},
		{"master alone", []any{"master", int64(12), []any{}}, 0, 12, true},
		{"a replica", []any{"slave", "127.0.0.1", int64(7000), "connected", int64(10)}, 0, 0, false},
		{"no offset", []any{"master", "10", []any{}}, 0, 0, false},
		{"garbage", "x", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := redis.NewCmd(context.Background())
			cmd.SetVal(tc.reply)
			got, offset, err := masterRole(cmd)
			if (err == nil) != tc.ok || got != tc.want || offset != tc.offset {
				t.Fatalf("masterRole = %d, %d, %v; want %d, %d, ok %v", got, offset, err, tc.want, tc.offset, tc.ok)
			}
		})
	}
}
