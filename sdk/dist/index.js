// @agentfy/sdk: the client of the Agentfy browser view.
//
// - Agents.listAgents, WorkerView.getAgentWorkerView, WorkerView.getPartnerWorkerView:
//   generated from openapi/openapi.yaml (src/gen/).
// - client, createClient: the configured clients (client.ts).
// - watchWorkerView: the polling loop every viewer needs (poll.ts).
// - Every failure comes back as `{ error: { code, message } }` (errors.ts).
export * from './gen/index.js';
export { client, createClient } from './client.js';
export { ConfigurationError, isClientError, isErrorBody } from './errors.js';
export { callerPaceMs, maxRetryAfterMs, nextPollDelay, pollIntervalMs, pollJitterMs, requestTimeoutMs, retryAfterMs, watchWorkerView, } from './poll.js';
