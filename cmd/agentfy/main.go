// Command agentfy is the operator CLI: it seeds the directory, mints development tokens
// and organisation keys, starts and stops worker sessions, calls tools, makes a
// deployment's secrets and its audit stream, and reads and verifies the audit trail.
// It is in the API's image, so it links nothing of development: the local stack, the
// benchmark, the demo agent and site are cmd/agentfy-dev's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

const usage = `agentfy — operator CLI of Agentfy browser view

Usage:
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
  agentfy health URL                                 succeed when GET URL answers 200 (health checks)

The audit trail (as the audit NATS user, see below; agentfy audit CMD -h says more):
  agentfy audit views [-agent ID] [-viewer ID] [-since 24h]
                                                     the view decisions' events, one JSON object a line,
                                                     oldest first; -agent includes its refusals before
                                                     any read (401), kept on audit.view._
  agentfy audit admin [-since 24h]                   the admin changes' events, the source taken from
                                                     the subject they were published on
  agentfy audit verify [-since 24h]                  check each boot's sequence for gaps and repeats and
                                                     each admin event's source; exit 1 on any. Within a
                                                     boot only the numbers between the smallest and the
                                                     largest read in the window can be judged
  agentfy audit stream                               make the audit stream (as the operator) unless it is
                                                     there; fail when the one there weakens the trail

Configuration comes from the environment (see README.md): AGENTFY_DEPLOYMENT,
AGENTFY_REDIS_URL (or _ADDRS/_MASTER/_DB, _USERNAME, _PASSWORD) with the operator's
Redis user, AGENTFY_NATS_URL with AGENTFY_NATS_PASSWORD (the operator's NATS user),
AGENTFY_JWT_*. audit views, admin and verify connect to NATS as the audit user
(AGENTFY_NATS_USER, default agentfy-audit, with its AGENTFY_NATS_PASSWORD(_FILE)),
audit stream as the operator's, and neither to Redis: AGENTFY_REDIS_DB or
AGENTFY_REDIS_URL only names the database of the namespace.

Exit status: 0 done; 1 failed, or audit verify found a problem; 3 the change was made
but the audit trail did not acknowledge its event (stderr says which and why): do
not repeat it.

The development commands (dev, bench, demo, site) are agentfy-dev's:
go run ./cmd/agentfy-dev help.
`

// devCommands are cmd/agentfy-dev's, which this binary does not link.
var devCommands = []string{"dev", "bench", "demo", "site"}

type command func(ctx context.Context, args []string, stdout io.Writer) error

// exitUnrecorded is the exit status of a change made whose audit event the trail did
// not acknowledge (errUnrecorded).
const exitUnrecorded = 3

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "agentfy:", err)
	}
	os.Exit(exitCode(err))
}

// exitCode is the process's exit status after err: 0 for none (or a -h),
// exitUnrecorded for a change made but not recorded, whatever else failed after it
// (printing it, say), 1 for the rest.
func exitCode(err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUnrecorded):
		return exitUnrecorded
	}
	return 1
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
		"secrets":  cmdSecrets,
		"health":   cmdHealth,
		"audit":    cmdAudit,
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	c, ok := commands[args[0]]
	if !ok && slices.Contains(devCommands, args[0]) {
		return fmt.Errorf("%s is a development command: go run ./cmd/agentfy-dev %s", args[0], args[0])
	}
	if !ok {
		return fmt.Errorf("unknown command %q (try: agentfy help)", args[0])
	}
	return c(ctx, args[1:], stdout)
}
