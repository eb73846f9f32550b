package view

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/agentfy/agentfy/access"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/directory"
)

// The two checks of a view (View) each make one Redis round trip: the check's reads
// (access.Reads) share it with the session reads the view makes at the same point.
// Each read's error is its own, in the values returned: a failed round trip fails
// every read, and the check and the view judge each (a Redis error is a 503, never a
// refusal or "not live").

// firstRead is the first check's round trip: what the check reads, with the agent's
// current session id. The error is that id's: session.ErrNoSession when the agent has
// none.
func (s *Service) firstRead(ctx context.Context, agentID string, want access.Reads) (access.Facts, string, error) {
	p := s.rdb.Pipeline()
	facts := s.queueReads(ctx, p, agentID, want)
	currentID := s.sessions.QueueCurrentID(ctx, p, agentID)
	_, _ = p.Exec(ctx) // each read's error is its own
	id, err := currentID()
	return facts(), id, err
}

// recheckRead is the re-check's round trip: what the check reads, with the record of
// sessionID, the session the view captured. The error is the session's:
// session.ErrNoSession once it is not the agent's running or idle one (stopped, timed
// out, or replaced, which stops it).
func (s *Service) recheckRead(ctx context.Context, agentID, sessionID string, want access.Reads) (access.Facts, error) {
	p := s.rdb.Pipeline()
	facts := s.queueReads(ctx, p, agentID, want)
	still := s.sessions.QueueStillCurrent(ctx, p, agentID, sessionID)
	_, _ = p.Exec(ctx) // each read's error is its own
	_, err := still()
	return facts(), err
}

// queueReads queues on p the reads want names, of agentID and the records it names; the
// function, called after p ran, returns their values.
func (s *Service) queueReads(ctx context.Context, p redis.Pipeliner, agentID string, want access.Reads) func() access.Facts {
	var (
		key        func() (auth.OrgKey, error)
		agent      func() (directory.Agent, error)
		member     func() (bool, error)
		generation func() (int64, error)
	)
	if want.Token != "" {
		key = s.creds.QueueVerifyOrgKey(ctx, p, want.Token)
	}
	if want.Agent {
		agent = s.dir.QueueAgent(ctx, p, agentID)
	}
	if want.Team != "" {
		member = s.dir.QueueIsMember(ctx, p, want.Team, want.User)
	}
	if want.Generation {
		generation = s.dir.QueueGeneration(ctx, p)
	}
	return func() access.Facts {
		var f access.Facts
		if key != nil {
			f.Key, f.KeyErr = key()
		}
		if agent != nil {
			f.Agent, f.AgentErr = agent()
		}
		if member != nil {
			f.Member, f.MemberErr = member()
		}
		if generation != nil {
			f.Generation, f.GenerationErr = generation()
		}
		return f
	}
}
