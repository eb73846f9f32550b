package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/change"
	"github.com/agentfy/agentfy/cmd/internal/operator"
	"github.com/agentfy/agentfy/directory"
)

// The operator's changes of the directory and the keys, one record at a time. They
// write Redis with the operator's credential through change.Changer, as the admin API
// does, so a change is checked, applied and recorded exactly as there and takes effect
// at the next request on every replica. They go to Redis rather than to the admin API
// because they are the operator's way in when no replica answers, and because an admin
// key has to come from somewhere: `adminkey create` is the first step of every
// deployment.

// subcommands runs the subcommand args[0] of name from subs.
func subcommands(ctx context.Context, name string, args []string, stdout io.Writer, subs map[string]command) error {
	if len(args) == 0 {
		return fmt.Errorf("%s: say %s", name, strings.Join(sortedKeys(subs), ", "))
	}
	c, ok := subs[args[0]]
	if !ok {
		return fmt.Errorf("%s: unknown subcommand %q (%s)", name, args[0], strings.Join(sortedKeys(subs), ", "))
	}
	return c(ctx, args[1:], stdout)
}

func sortedKeys(m map[string]command) []string { return slices.Sorted(maps.Keys(m)) }

// changerOf is the change.Changer of the operator's stores: each change is made and
// described exactly as the admin API makes and describes it.
func changerOf(st *operator.Stores) change.Changer {
	return change.Changer{Dir: st.Dir, Creds: st.Creds, Sessions: st.Sessions}
}

// withStores parses fs from args, opens the stores and runs f.
func withStores(ctx context.Context, fs *flag.FlagSet, args []string, f func(*operator.Stores) error) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	st, err := operator.OpenStores(ctx)
	if err != nil {
		return err
	}
	defer operator.CloseRedis(st.RDB)
	return f(st)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func cmdUser(ctx context.Context, args []string, stdout io.Writer) error {
	return subcommands(ctx, "user", args, stdout, map[string]command{
		"put": func(ctx context.Context, args []string, stdout io.Writer) error {
			fs := flag.NewFlagSet("user put", flag.ContinueOnError)
			id := fs.String("id", "", "user `id` (the JWT's subject)")
			name := fs.String("name", "", "display `name`")
			return withStores(ctx, fs, args, func(st *operator.Stores) error {
				u := directory.User{ID: *id, Name: *name}
				ch, err := changerOf(st).PutUser(ctx, u)
				if err != nil {
					return err
				}
				unrecorded := recordChange(ctx, ch)
				return errors.Join(printJSON(stdout, map[string]string{"id": u.ID, "name": u.Name}), unrecorded)
			})
		},
	})
}

func cmdTeam(ctx context.Context, args []string, stdout io.Writer) error {
	return subcommands(ctx, "team", args, stdout, map[string]command{
		"put": func(ctx context.Context, args []string, stdout io.Writer) error {
			fs := flag.NewFlagSet("team put", flag.ContinueOnError)
			id := fs.String("id", "", "team `id`")
			name := fs.String("name", "", "display `name`")
			return withStores(ctx, fs, args, func(st *operator.Stores) error {
				t := directory.Team{ID: *id, Name: *name}
				ch, err := changerOf(st).PutTeam(ctx, t)
				if err != nil {
					return err
				}
				unrecorded := recordChange(ctx, ch)
				return errors.Join(printJSON(stdout, t), unrecorded)
			})
		},
	})
}

func cmdOrg(ctx context.Context, args []string, stdout io.Writer) error {
	return subcommands(ctx, "org", args, stdout, map[string]command{
		"put": func(ctx context.Context, args []string, stdout io.Writer) error {
			fs := flag.NewFlagSet("org put", flag.ContinueOnError)
			id := fs.String("id", "", "organisation `id`")
			name := fs.String("name", "", "display `name`")
			envs := fs.String("env", "", "comma-separated `environments`")
			return withStores(ctx, fs, args, func(st *operator.Stores) error {
				o := directory.Org{ID: *id, Name: *name, Environments: splitList(*envs)}
				ch, err := changerOf(st).PutOrg(ctx, o)
				if err != nil {
					return err
				}
				unrecorded := recordChange(ctx, ch)
				return errors.Join(printJSON(stdout, o), unrecorded)
			})
		},
	})
}

func cmdMember(ctx context.Context, args []string, stdout io.Writer) error {
	membership := func(add bool) command {
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			verb := map[bool]string{true: "add", false: "remove"}[add]
			fs := flag.NewFlagSet("member "+verb, flag.ContinueOnError)
			team := fs.String("team", "", "team `id`")
			user := fs.String("user", "", "user `id`")
			return withStores(ctx, fs, args, func(st *operator.Stores) error {
				c := changerOf(st)
				apply := c.RemoveMember
				if add {
					apply = c.AddMember
				}
				ch, err := apply(ctx, *team, *user)
				if err != nil {
					return err
				}
				unrecorded := recordChange(ctx, ch)
				return errors.Join(printJSON(stdout, map[string]string{"team": *team, "user": *user, "member": map[bool]string{true: "yes", false: "no"}[add]}), unrecorded)
			})
		}
	}
	return subcommands(ctx, "member", args, stdout, map[string]command{"add": membership(true), "remove": membership(false)})
}

func cmdAgent(ctx context.Context, args []string, stdout io.Writer) error {
	return subcommands(ctx, "agent", args, stdout, map[string]command{
		"put": func(ctx context.Context, args []string, stdout io.Writer) error {
			fs := flag.NewFlagSet("agent put", flag.ContinueOnError)
			var a directory.Agent
			fs.StringVar(&a.ID, "id", "", "agent `id`")
			fs.StringVar(&a.Name, "name", "", "display `name`")
			fs.StringVar(&a.TeamID, "team", "", "team `id` (moves the agent if it is in another)")
			fs.StringVar(&a.OrgID, "org", "", "organisation `id`")
			fs.StringVar(&a.Environment, "env", "", "environment `name` of the organisation")
			return withStores(ctx, fs, args, func(st *operator.Stores) error {
				ch, before, err := changerOf(st).PutAgent(ctx, a)
				if err != nil {
					return err
				}
				unrecorded := recordChange(ctx, ch)
				return errors.Join(printJSON(stdout, struct {
					directory.Agent
					PreviousTeam string `json:"previousTeam,omitempty"`
				}{a, before}), unrecorded)
			})
		},
		"delete": func(ctx context.Context, args []string, stdout io.Writer) error {
			fs := flag.NewFlagSet("agent delete", flag.ContinueOnError)
			id := fs.String("id", "", "agent `id`")
			return withStores(ctx, fs, args, func(st *operator.Stores) error {
				ch, err := changerOf(st).DeleteAgent(ctx, *id)
				if err != nil {
					return err
				}
				unrecorded := recordChange(ctx, ch)
				return errors.Join(printJSON(stdout, map[string]string{"id": *id, "deleted": "yes"}), unrecorded)
			})
		},
	})
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// cmdOrgKey creates (the default, as before: `agentfy orgkey -org … -env …`), lists and
// revokes organisation keys.
func cmdOrgKey(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return orgKeyCreate(ctx, args, stdout)
	}
	return subcommands(ctx, "orgkey", args, stdout, map[string]command{
		"create": orgKeyCreate,
		"list": func(ctx context.Context, args []string, stdout io.Writer) error {
			fs := flag.NewFlagSet("orgkey list", flag.ContinueOnError)
			org := fs.String("org", "", "organisation `id`")
			return withStores(ctx, fs, args, func(st *operator.Stores) error {
				if _, err := st.Dir.Org(ctx, *org); err != nil {
					return fmt.Errorf("orgkey list: organisation %q: %w", *org, err)
				}
				keys, err := st.Creds.ListOrgKeys(ctx, *org)
				if err != nil {
					return err
				}
				type listed struct {
					ID          string   `json:"id"`
					Environment string   `json:"environment"`
					Scopes      []string `json:"scopes"`
					CreatedAt   string   `json:"createdAt"`
				}
				out := make([]listed, len(keys))
				for i, k := range keys {
					out[i] = listed{k.ID, k.Environment, k.Scopes, k.CreatedAt.UTC().Format("2006-01-02T15:04:05Z")}
				}
				return printJSON(stdout, map[string]any{"keys": out})
			})
		},
		"revoke": func(ctx context.Context, args []string, stdout io.Writer) error {
			fs := flag.NewFlagSet("orgkey revoke", flag.ContinueOnError)
			org := fs.String("org", "", "organisation `id`")
			id := fs.String("id", "", "key `id` (orgkey list shows them)")
			return withStores(ctx, fs, args, func(st *operator.Stores) error {
				if !auth.ValidKeyID(*id) {
					return errors.New("orgkey revoke: -id must be a key's id (16 hex digits)")
				}
				ch, deleted, err := changerOf(st).RevokeOrgKey(ctx, *org, *id)
				if err != nil {
					return err
				}
				if !deleted {
					return fmt.Errorf("orgkey revoke: %s has no key %s (nothing changed)", *org, *id)
				}
				unrecorded := recordChange(ctx, ch)
				return errors.Join(printJSON(stdout, map[string]string{"org": *org, "id": *id, "revoked": "yes"}), unrecorded)
			})
		},
	})
}

func orgKeyCreate(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("orgkey", flag.ContinueOnError)
	org := fs.String("org", "", "organisation `id`")
	env := fs.String("env", "", "environment `name`")
	scopes := fs.String("scope", auth.ScopeWorkerLogsRead, "comma-separated scopes")
	return withStores(ctx, fs, args, func(st *operator.Stores) error {
		ch, tok, _, err := changerOf(st).CreateOrgKey(ctx, change.OrgKeyRequest{
			Org: *org, Environment: *env, Scopes: splitList(*scopes),
			OrgField: "-org", EnvironmentField: "-env",
		})
		if err != nil {
			return err
		}
		// The key is shown once: printed whether or not its event is recorded.
		unrecorded := recordChange(ctx, ch)
		_, err = fmt.Fprintln(stdout, tok)
		return errors.Join(err, unrecorded)
	})
}

func cmdAdminKey(ctx context.Context, args []string, stdout io.Writer) error {
	return subcommands(ctx, "adminkey", args, stdout, map[string]command{
		"create": func(ctx context.Context, args []string, stdout io.Writer) error {
			fs := flag.NewFlagSet("adminkey create", flag.ContinueOnError)
			name := fs.String("name", "", "a `label` for the key (who or what holds it)")
			return withStores(ctx, fs, args, func(st *operator.Stores) error {
				ch, tok, key, err := changerOf(st).CreateAdminKey(ctx, *name)
				if err != nil {
					return err
				}
				// The key is shown once: printed whether or not its event is recorded.
				unrecorded := recordChange(ctx, ch)
				return errors.Join(printJSON(stdout, map[string]string{"id": key.ID, "name": key.Name, "key": tok}), unrecorded)
			})
		},
		"revoke": func(ctx context.Context, args []string, stdout io.Writer) error {
			fs := flag.NewFlagSet("adminkey revoke", flag.ContinueOnError)
			id := fs.String("id", "", "admin key `id`")
			return withStores(ctx, fs, args, func(st *operator.Stores) error {
				ch, deleted, err := changerOf(st).RevokeAdminKey(ctx, *id)
				if err != nil {
					return err
				}
				if !deleted {
					return fmt.Errorf("adminkey revoke: no admin key %q (nothing changed)", *id)
				}
				unrecorded := recordChange(ctx, ch)
				return errors.Join(printJSON(stdout, map[string]string{"id": *id, "revoked": "yes"}), unrecorded)
			})
		},
	})
}
