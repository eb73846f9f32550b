// Package broker owns the agent's headless Chromium for one worker session.
//
// The broker is an isolated process ("agentfy-broker") that serves HTTP/1.1 on a
// unix socket in the IPC directory it shares with the worker. It offers two
// kinds of work that never mix:
//
//   - Browser tools (browser_open, browser_play, browser_tabs, browser_close),
//     run one at a time through a bounded tool operation queue, each under a
//     deadline. Every tab lives in its own window, because a background tab in
//     headless Chromium does not paint.
//   - Capture (POST /observe): a read-only JPEG capture of the tab the agent
//     is working on, sealed to a public key that only the broker learns by
//     redeeming the request id at the API with its broker pass. Capture
//     never waits in the tool queue, never activates a tab, never touches the
//     DOM or emulation, never changes the tab order, and runs no script the
//     page can see: the one script it runs is its own read-only motion probe
//     (motion.js, called by motion.go), in isolated worlds of the broker's
//     own that the page's scripts cannot reach. Every CDP call it makes runs
//     under a deadline.
//
// The package never talks to Redis or NATS; its only network peer besides
// Chromium is the API's route that redeems grants (wire.ConsumePath), reached through
// [ConsumeClient]. Configuration is passed in by cmd/agentfy-broker.
package broker
