package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/cmd/internal/apiconf"
	"github.com/agentfy/agentfy/cmd/internal/operator"
	"github.com/agentfy/agentfy/directory"
)

// cmdHealth is a container health check (operator.Health).
func cmdHealth(ctx context.Context, args []string, _ io.Writer) error {
	return operator.Health(ctx, args)
}

func cmdSeed(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	file := fs.String("file", "testdata/directory.json", "seed `file` (JSON)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f, err := os.Open(*file)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	seed, err := directory.ParseSeed(f)
	if err != nil {
		return err
	}
	st, err := operator.OpenStores(ctx)
	if err != nil {
		return err
	}
	defer operator.CloseRedis(st.RDB)
	ch, err := changerOf(st).Seed(ctx, seed)
	if err != nil {
		return err
	}
	unrecorded := recordChange(ctx, ch)
	_, err = fmt.Fprintf(stdout, "seeded %d teams, %d users, %d organisations, %d agents\n", len(seed.Teams), len(seed.Users), len(seed.Orgs), len(seed.Agents))
	return errors.Join(err, unrecorded)
}

func cmdToken(_ context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	user := fs.String("user", "", "user `id` (the token's subject)")
	ttl := fs.Duration("ttl", 12*time.Hour, "lifetime")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !directory.ValidID(*user) {
		return errors.New("token: -user is required")
	}
	cfg, err := apiconf.JWT(nil)
	if err != nil {
		return err
	}
	if cfg.HS256Secret == nil {
		return errors.New("token: development tokens need AGENTFY_JWT_HS256_SECRET; production tokens come from the identity provider")
	}
	tok, err := auth.MintHS256(cfg.HS256Secret, cfg.Issuer, cfg.Audience, *user, time.Now(), *ttl)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	return nil
}

func cmdSession(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || (args[0] != "start" && args[0] != "stop") {
		return errors.New("session: start or stop")
	}
	fs := flag.NewFlagSet("session "+args[0], flag.ContinueOnError)
	agent := fs.String("agent", "", "agent `id`")
	id := fs.String("session", "", "session `id` (stop)")
	workerPassFile := fs.String("worker-pass-file", "", "start: write the worker pass to this `file` (mode 0600) instead of printing it")
	brokerPassFile := fs.String("broker-pass-file", "", "start: write the broker pass to this `file` (mode 0600) instead of printing it")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	st, err := operator.OpenStores(ctx)
	if err != nil {
		return err
	}
	defer operator.CloseRedis(st.RDB)
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	switch args[0] {
	case "start":
		ch, sess, passes, err := changerOf(st).StartSession(ctx, *agent)
		if err != nil {
			return err
		}
		// The passes are shown once: printed whether or not the event is recorded.
		unrecorded := recordChange(ctx, ch)
		out := map[string]string{"sessionId": sess.ID, "agentId": *agent, "workerPass": passes.Worker, "brokerPass": passes.Broker}
		// Deployments hand each pass to its own container through a file, so neither
		// pass is ever printed where the other side could read it.
		for _, f := range []struct{ path, key, pass string }{
			{*workerPassFile, "workerPass", passes.Worker},
			{*brokerPassFile, "brokerPass", passes.Broker},
		} {
			if f.path == "" {
				continue
			}
			if err := os.WriteFile(f.path, []byte(f.pass+"\n"), 0o600); err != nil {
				return errors.Join(fmt.Errorf("session start: %w", err), unrecorded)
			}
			out[f.key] = "written to " + f.path
		}
		return errors.Join(enc.Encode(out), unrecorded)
	default:
		sid := *id
		if sid == "" {
			cur, err := st.Sessions.Current(ctx, *agent)
			if err != nil {
				return fmt.Errorf("session stop: agent %q: %w", *agent, err)
			}
			sid = cur.ID
		}
		ch, sess, err := changerOf(st).StopSession(ctx, sid, "operator")
		if err != nil {
			return err
		}
		unrecorded := recordChange(ctx, ch)
		return errors.Join(enc.Encode(map[string]string{"sessionId": sess.ID, "agentId": sess.AgentID, "status": "stopped"}), unrecorded)
	}
}
