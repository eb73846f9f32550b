// The polling cadence of the «Браузер агента» window, and of any client that follows the
// SDK's documented loop (sdk/README.md).

/** pollIntervalMs is the mean time between two frame requests. */
export const pollIntervalMs = 5_000;
/**
 * pollJitterMs spreads each wait over pollIntervalMs ± pollJitterMs. Two viewers with
 * the same fixed period whose requests land within the API's 2-s gate of each other
 * would stay so for minutes, and the later one would get 429 on every poll.
 */
export const pollJitterMs = 500;
/**
 * callerPaceMs is the least time between two view requests of one caller for one agent
 * that the API lets through (its CallerPace); it is also more than its 2-s gate.
 */
export const callerPaceMs = 3_000;
/** maxRetryAfterMs bounds what a Retry-After header may add to a wait. */
export const maxRetryAfterMs = 60_000;

/**
 * nextPollDelay draws the wait before the next request, in ms: the normal interval with
 * its jitter, plus what a 429 asked for (retryAfterMs). Waiting the Retry-After on top
 * of the interval after a 429 moves a viewer out of step with the one that took the
 * agent's window, so that two viewers share it rather than one losing for minutes.
 */
export function nextPollDelay(retryAfterMs = 0, random: () => number = Math.random): number {
  return pollIntervalMs + retryAfterMs - pollJitterMs + random() * 2 * pollJitterMs;
}

/** retryAfterMs reads a 429's Retry-After (seconds) in ms; 0 for any other answer. */
export function retryAfterMs(response: Response | undefined): number {
  if (response?.status !== 429) {
    return 0;
  }
  const seconds = Number(response.headers.get('Retry-After'));
  return Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds * 1_000, maxRetryAfterMs) : 2_000;
}
