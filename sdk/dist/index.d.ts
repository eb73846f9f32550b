export * from './gen/index.js';
export { client, createClient, type Client, type Config } from './client.js';
export { ConfigurationError, isClientError, isErrorBody, type ClientError, type ClientErrorCode } from './errors.js';
export { callerPaceMs, maxRetryAfterMs, nextPollDelay, pollIntervalMs, pollJitterMs, requestTimeoutMs, retryAfterMs, watchWorkerView, type ViewUpdate, type WatchEnd, type WatchOptions, } from './poll.js';
