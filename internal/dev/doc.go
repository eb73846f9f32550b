// Package dev is the root of the development layer: what runs the system on one machine
// for a person, a bench or a test, and is never linked into a production binary.
//
//   - redisserver and natsserver start redis-server (a single server, a Cluster, a
//     Sentinel set) and an embedded NATS server; servers builds and runs Ory Hydra and
//     Jaeger, and has the process helpers they share;
//   - stack starts the whole system on those servers (the development command, the
//     bench and the integration tests all use it, so what is tested is what runs);
//   - toolbin prints the path of a tool binary built from internal/tools.
//
// Nothing here imports the testing package or the test harness (internal/test), which
// builds on this layer, not the other way round: deps_test.go checks it, for this tree
// and for every command.
package dev
