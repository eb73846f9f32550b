// Package servers runs the real servers of the development stack, the bench and the
// tests besides redis-server and NATS (internal/dev/redisserver, internal/dev/natsserver):
// Ory Hydra, an OpenID provider (BuildHydra, StartHydra), and Jaeger v2, a trace backend
// (BuildJaeger, RunJaeger), each built from source of its pinned tool module
// (internal/tools) into the user's cache and run on free loopback ports; and what a
// launcher of processes needs (Buffer for a process's log, Descendants and Alive from
// /proc). It links no testing: internal/test/testenv wraps it for tests (skipping under
// -short, stopping at cleanup).
package servers
