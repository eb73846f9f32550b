// Command agentfy is the operator CLI: it seeds the directory, mints development tokens
// and organisation keys, starts and stops worker sessions, runs the whole local stack
// (see dev.go) and measures it (internal/bench).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/internal/bench"
	"github.com/agentfy/agentfy/internal/stack"
)

const usage = `agentfy — operator CLI of Agentfy browser view

Usage:
  agentfy dev [--ready-file f.json]                  run the whole local stack (installs what is missing)
  agentfy bench [-out BENCHMARKS.md] [-quick]        measure the stack and print a table
                [-json FILE] [-cpuprofile FILE]
  agentfy seed [-file testdata/directory.json]       load users, teams, orgs and agents
  agentfy token -user ID [-ttl 12h]                  mint a development JWT (HS256)
  agentfy orgkey [create] -org ID -env NAME [-scope S,...]
                                                     create an organisation API key (shown once)
  agentfy orgkey list -org ID                        an organisation's keys (ids, never secrets)
  agentfy orgkey revoke -org ID -id KEY              revoke a key: its next request is refused
  agentfy adminkey create -name LABEL                create an admin key for the admin API (shown once)
  agentfy adminkey revoke -id KEY                    revoke an admin key
  agentfy user put -id ID -name NAME                 create or rename a user (team, org: the same)
  agentfy team put -id ID -name NAME
  agentfy org put -id ID -name NAME -env E1,E2
  agentfy member add|remove -team ID -user ID        change one membership, effective at the next view
  agentfy agent put -id ID -name N -team T -org O -env E
                                                     create an agent or move it to another team
  agentfy agent delete -id ID                        delete an agent
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
		"seed":     cmdSeed,
		"token":    cmdToken,
		"orgkey":   cmdOrgKey,
		"adminkey": cmdAdminKey,
		"user":     cmdUser,
		"team":     cmdTeam,
		"org":      cmdOrg,
		"member":   cmdMember,
		"agent":    cmdAgent,
		"session":  cmdSession,
		"tool":     cmdTool,
		"dev":      cmdDev,
		"bench":    cmdBench,
		"secrets":  cmdSecrets,
		"demo":     cmdDemo,
		"site":     cmdSite,
		"health":   cmdHealth,
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

// cmdBench runs the benchmark suite (internal/bench) against a real local stack, prints
// the table and writes BENCHMARKS.md and, with -json, the raw results.
func cmdBench(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	out := fs.String("out", "", "write the report to this Markdown `file` (default BENCHMARKS.md at the repository root; - for none)")
	jsonOut := fs.String("json", "", "also write the raw results to this JSON `file`")
	quick := fs.Bool("quick", false, "small samples: a smoke run of every suite in well under a minute")
	chromium := fs.String("chromium", os.Getenv("AGENTFY_CHROMIUM"), "Chromium `binary` (default /usr/bin/chromium)")
	verbose := fs.Bool("v", false, "log the stack's warnings")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the end-to-end suite to this `file`, of the fast paths to file.fastpaths and of the CPU windows to file.footprint (go tool pprof)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected arguments %q", fs.Args())
	}
	level := zerolog.ErrorLevel
	if *verbose {
		level = zerolog.WarnLevel
	}
	progress := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "• "+format+"\n", a...) }
	if err := ensureInstalled(ctx, progress); err != nil {
		return err
	}
	root, err := stack.FindRoot()
	if err != nil {
		return err
	}
	if *out == "" {
		*out = filepath.Join(root, "BENCHMARKS.md")
	}

	res, err := bench.Run(ctx, bench.Options{
		Root: root, Quick: *quick, Chromium: *chromium, CPUProfile: *cpuProfile,
		Command:  strings.TrimSpace("go run ./cmd/agentfy bench " + strings.Join(args, " ")),
		Log:      zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05"}).Level(level).With().Timestamp().Logger(),
		Progress: progress,
	})
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if _, err := io.WriteString(stdout, res.Markdown(false)); err != nil {
		return err
	}
	if *out != "-" {
		if err := writeFileAtomic(*out, []byte(res.Markdown(true))); err != nil {
			return err
		}
		progress("wrote %s", *out)
	}
	if *jsonOut != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := writeFileAtomic(*jsonOut, b); err != nil {
			return err
		}
	}
	return nil
}
