package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/change"
	"github.com/agentfy/agentfy/cmd/internal/conf"
	"github.com/agentfy/agentfy/cmd/internal/operator"
)

// auditTimeout bounds how long the CLI, its change made, waits for the audit stream to
// acknowledge the change's event.
const auditTimeout = 3 * time.Second

// errUnrecorded is the error of a command whose change is made but whose audit event the
// trail did not acknowledge. It has an exit status of its own (exitUnrecorded): a
// script must not repeat the change as if it had failed (a second key, a second
// session), and must not take it as recorded either.
var errUnrecorded = errors.New("the change is made but not recorded in the audit trail")

// recordChange publishes the audit event of a change the CLI has made (audit.Admin,
// source operator-cli) as the operator, and waits up to auditTimeout for the stream's
// acknowledgement. The change is done whatever happens here, so the caller prints what
// it made first and returns this error after: nil once the trail holds the event, else
// errUnrecorded with the action and why (never the event, which main prints on stderr).
func recordChange(ctx context.Context, ch change.Change) error {
	action := string(ch.Action)
	// The change is made: an interrupt now must not cost its record.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	defer cancel()
	p, err := operator.Audit("agentfy-cli", conf.Logger("cli"))
	if err != nil {
		return fmt.Errorf("%w: %s: no NATS connection: %w", errUnrecorded, action, err)
	}
	err = p.AdminAcked(ctx, audit.Admin{Action: action, IDs: ch.Map()})
	// Nothing waits in the publisher's buffer (AdminAcked does not use it): Close only
	// closes the connection.
	_ = p.Close(ctx)
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("%w: %s: no audit stream %s answers (the platform makes it, or `agentfy audit stream`): %w", errUnrecorded, action, bus.AuditStream, err)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errUnrecorded, action, err)
	}
	return nil
}
