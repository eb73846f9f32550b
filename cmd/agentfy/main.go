// Command agentfy is the operator CLI: it seeds the directory, mints development tokens
// and organisation keys, starts and stops worker sessions, and (see dev.go) runs the
// whole local stack.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
)

const usage = `agentfy — operator CLI of Agentfy browser view

Usage:
  agentfy dev [--ready-file f.json]                  run the whole local stack (installs what is missing)
  agentfy bench [-out BENCHMARKS.md] [-quick]        measure the stack and print a table
                [-json FILE] [-cpuprofile FILE]
  agentfy seed [-file testdata/directory.json]       load users, teams, orgs and agents
  agentfy token -user ID [-ttl 12h]                  mint a development JWT (HS256)
  agentfy orgkey -org ID -env NAME [-scope S,...]    create an organisation API key (shown once)
  agentfy session start -agent ID                    start a worker session (prints both passes once)
  agentfy session stop (-session ID | -agent ID)     stop a session and revoke its passes
  agentfy tool -agent ID -name TOOL [-args JSON]     run a tool in the agent's session (over NATS)
  agentfy secrets -out DIR [-db N] [-force]          generate the role credentials of a deployment and
                                                     its NATS server config and Redis ACL file
  agentfy demo [-agent ID] [-site URL]               the demo agent: browse the demo site in the agent's
                                                     sessions through tool calls (the compose stack)
  agentfy site [-dir testdata/site] [-listen :8000]  serve the demo website
  agentfy health URL                                 succeed when GET URL answers 200 (health checks)

Configuration comes from the environment (see README.md): AGENTFY_DEPLOYMENT,
AGENTFY_REDIS_URL (or _ADDRS/_MASTER/_DB, _USERNAME, _PASSWORD) with the operator's
Redis user, AGENTFY_NATS_URL with AGENTFY_NATS_PASSWORD (the operator's NATS user),
AGENTFY_JWT_*.
`

type command func(ctx context.Context, args []string, stdout io.Writer) error

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentfy:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	commands := map[string]command{
		"seed":    cmdSeed,
		"token":   cmdToken,
		"orgkey":  cmdOrgKey,
		"session": cmdSession,
		"tool":    cmdTool,
		"dev":     cmdDev,
		"bench":   cmdBench,
		"secrets": cmdSecrets,
		"demo":    cmdDemo,
		"site":    cmdSite,
		"health":  cmdHealth,
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	c, ok := commands[args[0]]
	if !ok {
		return fmt.Errorf("unknown command %q (try: agentfy help)", args[0])
	}
	return c(ctx, args[1:], stdout)
}

// closeRedis closes a client, ignoring the error of an already closed one.
func closeRedis(c redis.UniversalClient) { _ = c.Close() }
