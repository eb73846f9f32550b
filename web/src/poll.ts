// The polling cadence of the «Браузер агента» window, and of any client that follows the
// SDK's documented loop (sdk/README.md).

/** pollIntervalMs is the mean time between two frame requests. */
export const pollIntervalMs = 5_000;
/**
 * pollJitterMs spreads each wait over pollIntervalMs ± pollJitterMs. Two viewers with
 * the same fixed period whose requests land within the API's 2-s gate of each other
 * would stay so for minutes, and the later one would get 429 on every poll; random
 * waits move them apart at once.
 */
export const pollJitterMs = 1_000;
/**
 * callerPaceMs is the least time between two view requests of one caller for one agent
 * that the API lets through (its CallerPace); it is also more than its 2-s gate.
 */
export const callerPaceMs = 3_000;

/** nextPollDelay draws the wait before the next request, in ms. */
export function nextPollDelay(random: () => number = Math.random): number {
  return pollIntervalMs - pollJitterMs + random() * 2 * pollJitterMs;
}
