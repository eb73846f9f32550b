package main

import (
	"context"
	"strconv"
	"time"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/cmd/internal/conf"
	"github.com/agentfy/agentfy/cmd/internal/operator"
)

// auditTimeout bounds how long the CLI, its change made, waits to publish the change's
// audit event before it exits.
const auditTimeout = 3 * time.Second

// recordChange publishes the audit event of a change the CLI has made (audit.Admin,
// source operator-cli) on the operator's NATS connection: the action and the ids it
// touched, as pairs. The change is done whatever happens here: a NATS server that does
// not answer, or that refuses the event, costs a warning on stderr (the action and why,
// never the event) and at most auditTimeout.
func recordChange(ctx context.Context, action string, ids ...string) {
	log := conf.Logger("cli")
	p, err := operator.Audit("agentfy-cli", log)
	if err != nil {
		log.Warn().Err(err).Str("action", action).Msg("audit event not published: no NATS connection")
		return
	}
	touched := make(map[string]string, len(ids)/2)
	for i := 0; i+1 < len(ids); i += 2 {
		touched[ids[i]] = ids[i+1]
	}
	p.Admin(ctx, audit.Admin{Source: audit.SourceOperatorCLI, Action: action, IDs: touched})
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	defer cancel()
	if err := p.Close(cctx); err != nil || p.Dropped() > 0 {
		log.Warn().Err(err).Str("action", action).Msg("audit event not published")
	}
}

// count is n in decimal, for the ids of a change that touched many records.
func count(n int) string { return strconv.Itoa(n) }
