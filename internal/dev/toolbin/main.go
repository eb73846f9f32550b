// Command toolbin prints the path of a tool binary the tests build from source into
// the user's cache (internal/tools), building it first when it is missing — the same
// binary, under the same lock, as the tests use:
//
//	go run ./internal/dev/toolbin jaeger
//
// scripts/compose-images.sh makes the compose stack's stand-in Jaeger image from it.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/agentfy/agentfy/internal/dev/servers"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] != "jaeger" {
		fmt.Fprintln(os.Stderr, "usage: toolbin jaeger")
		os.Exit(2)
	}
	bin, err := servers.BuildJaeger(context.Background(), func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "toolbin: "+format+"\n", args...)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolbin:", err)
		os.Exit(1)
	}
	fmt.Println(bin)
}
