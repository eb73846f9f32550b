package view

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/access"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/keyspace"
	"github.com/agentfy/agentfy/session"
)

// The two checks of a view (View) each make one Redis round trip: the check's reads
// (access.Reads) share it with the session read the view makes at the same point. This
// file owns that round trip: it reads each record by its key (keyspace) with one
// pipelined command, and the record's own store turns what was read into its value
// (auth.OrgKeyClaim.Verify, directory.Store.AgentFromRecord, directory.ParseGeneration,
// session.CurrentID, session.Store.StillCurrent), as the store's own reads do. On a
// Redis Cluster the records are in several slots: the client sends the pipeline's
// commands to their nodes at once, one round trip each.
//
// Each read's error is its own, in the values returned: a failed round trip fails
// every read with a Redis error, which a store never sees (it would take an empty
// answer for a record that is gone), and the check and the view judge each (a Redis
// error is a 503, never a refusal or "not live").

// firstRead is the first check's round trip: what the check reads, with the agent's
// current session id. The error is that id's: session.ErrNoSession when the agent has
// none.
func (s *Service) firstRead(ctx context.Context, agentID string, want access.Reads) (access.Facts, string, error) {
	keys := s.ns.Keys()
	p := s.rdb.Pipeline()
	reads := queueReads(ctx, p, keys, agentID, want)
	pointer := p.Get(ctx, keys.CurrentSession(agentID))
	_, _ = p.Exec(ctx) // each read's error is its own
	f := s.facts(reads)
	v, err := stringOrNone(pointer)
	if err != nil {
		return f, "", fmt.Errorf("view: read the session pointer: %w", err)
	}
	id, err := session.CurrentID(v)
	return f, id, err
}

// recheckRead is the re-check's round trip: what the check reads, with the record of
// sessionID, the session the view captured. The error is the session's:
// session.ErrNoSession once it is not the agent's running or idle one (stopped, timed
// out, or replaced, which stops it).
func (s *Service) recheckRead(ctx context.Context, agentID, sessionID string, want access.Reads) (access.Facts, error) {
	keys := s.ns.Keys()
	p := s.rdb.Pipeline()
	reads := queueReads(ctx, p, keys, agentID, want)
	record := p.HGetAll(ctx, keys.Session(sessionID))
	_, _ = p.Exec(ctx) // each read's error is its own
	f := s.facts(reads)
	m, err := record.Result()
	if err != nil {
		return f, fmt.Errorf("view: read the session: %w", err)
	}
	_, err = s.sessions.StillCurrent(agentID, sessionID, m)
	return f, err
}

// checkReads are the reads of one check, queued on a pipeline: a nil command was not
// queued, because the check did not ask for it or because no key can name its record
// (a malformed token or agent id).
type checkReads struct {
	want       access.Reads
	agentID    string
	claim      auth.OrgKeyClaim
	key, agent *redis.MapStringStringCmd
	member     *redis.BoolCmd
	generation *redis.StringCmd
}

// queueReads queues on p the reads want names, of agentID and the records it names.
func queueReads(ctx context.Context, p redis.Pipeliner, keys keyspace.Keys, agentID string, want access.Reads) checkReads {
	r := checkReads{want: want, agentID: agentID}
	if want.Token != "" {
		var ok bool
		if r.claim, ok = auth.ClaimOrgKey(want.Token); ok {
			r.key = p.HGetAll(ctx, keys.OrgKey(r.claim.ID()))
		}
	}
	if want.Agent && directory.ValidID(agentID) {
		r.agent = p.HGetAll(ctx, keys.Agent(agentID))
	}
	if want.Team != "" {
		r.member = p.SIsMember(ctx, keys.TeamMembers(want.Team), want.User)
	}
	if want.Generation {
		r.generation = p.Get(ctx, keys.DirectoryGeneration())
	}
	return r
}

// facts returns the values of the reads, once their pipeline ran: what each store's
// own read would return, or the read's Redis error.
func (s *Service) facts(r checkReads) access.Facts {
	var f access.Facts
	switch {
	case r.want.Token == "":
	case r.key == nil:
		f.KeyErr = auth.ErrUnauthenticated
	default:
		m, err := r.key.Result()
		if err != nil {
			f.KeyErr = fmt.Errorf("view: read the org key: %w", err)
			break
		}
		f.Key, f.KeyErr = r.claim.Verify(m)
	}
	switch {
	case !r.want.Agent:
	case r.agent == nil:
		f.AgentErr = directory.ErrNotFound
	default:
		m, err := r.agent.Result()
		if err != nil {
			f.AgentErr = fmt.Errorf("view: read the agent: %w", err)
			break
		}
		f.Agent, f.AgentErr = s.dir.AgentFromRecord(r.agentID, m)
	}
	if r.member != nil {
		if ok, err := r.member.Result(); err != nil {
			f.MemberErr = fmt.Errorf("view: read the membership: %w", err)
		} else {
			f.Member = ok
		}
	}
	if r.generation != nil {
		v, err := stringOrNone(r.generation)
		if err != nil {
			f.GenerationErr = fmt.Errorf("view: read the directory's generation: %w", err)
		} else {
			f.Generation, f.GenerationErr = directory.ParseGeneration(v)
		}
	}
	return f
}

// stringOrNone is what GET read: the value, "" when there is no key (the stores'
// decoders take "" for none), or the Redis error.
func stringOrNone(cmd *redis.StringCmd) (string, error) {
	v, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, err
}
