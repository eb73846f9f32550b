// watchWorkerView: the polling loop every client of the browser view needs, done once.
//
// The API's rules (the OpenAPI document's description): ask at most every 5 s; one view
// per agent in 2 s passes, whoever asks (the per-agent gate), and one per agent per
// caller (a user or an organisation key) every 3 s (the caller's pace); a refused
// request gets 429 with Retry-After, the whole seconds really left: 1–3 of the caller's
// own pace, 2 when another caller took the agent's window. 429 and 503 are temporary
// and never mean the browser closed; only `{"live":false}` does (it is answered before
// the gate and costs no window or pace). A 503 whose code is `identity_unavailable`
// means the API could not check the token because the identity provider does not
// answer: the token may well be good, so it is retried like any 503 and never ends the
// watch (only 401 says the token itself is wrong). The loop below asks, waits 5 s ± 0.5 s (and a
// 429's Retry-After on top: the jitter keeps two viewers of one agent from staying in
// step, the Retry-After moves the loser out of the winner's window), reports every
// answer, and stops on `{"live":false}`, on an answer that will not change by asking
// again (401, 403, 404) or when its signal aborts.

import type { Client } from './gen/client/index.js';
import { WorkerView } from './gen/sdk.gen.js';
import type { ErrorBody, WorkerPage } from './gen/types.gen.js';

/** pollIntervalMs is the mean time between two requests. */
export const pollIntervalMs = 5_000;
/** pollJitterMs spreads each wait over pollIntervalMs ± pollJitterMs. */
export const pollJitterMs = 500;
/** callerPaceMs is the least time between two requests of one caller for one agent. */
export const callerPaceMs = 3_000;
/** maxRetryAfterMs bounds what a Retry-After header may add to a wait. */
export const maxRetryAfterMs = 60_000;
/** requestTimeoutMs bounds one request (the API answers within about 10 s). */
export const requestTimeoutMs = 20_000;

/**
 * nextPollDelay draws the wait before the next request, in ms: the normal interval with
 * its jitter, plus what a 429 asked for.
 */
export function nextPollDelay(retryAfter = 0, random: () => number = Math.random): number {
  return pollIntervalMs + retryAfter - pollJitterMs + random() * 2 * pollJitterMs;
}

/** retryAfterMs reads a 429's Retry-After (seconds) in ms; 0 for any other answer. */
export function retryAfterMs(response: Response | undefined): number {
  if (response?.status !== 429) {
    return 0;
  }
  const seconds = Number(response.headers.get('Retry-After'));
  return Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds * 1_000, maxRetryAfterMs) : 2_000;
}

/** What one answer said. `at` is the Date.now() at which its request was sent. */
export type ViewUpdate =
  /** A frame of the agent's current tab. */
  | { kind: 'frame'; page: WorkerPage; at: number }
  /** The browser runs but has no tab open. */
  | { kind: 'noTab'; at: number }
  /**
   * No frame this time, but the browser may well be open: keep showing the last frame.
   * `status` is the HTTP status (429, 503, …), undefined when no answer arrived; `error`
   * says why (`rate_limited`, `unavailable`, `network`, `timeout`, `bad_response`, …).
   */
  | { kind: 'unavailable'; status: number | undefined; error: ErrorBody; at: number }
  /** `{"live":false}`: no running or idle session. The watch ends after this update. */
  | { kind: 'closed'; at: number };

/** Why a watch ended. */
export type WatchEnd =
  | { reason: 'closed' }
  | { reason: 'aborted' }
  /** The API refused the credential (401), the key's scope (403) or the agent (404). */
  | { reason: 'unauthenticated' | 'forbidden' | 'notFound'; status: 401 | 403 | 404; error: ErrorBody };

export interface WatchOptions {
  /** The agent to watch. */
  agentId: string;
  /** With orgId, the partner route (auth is the organisation's key); else the member route (a JWT). */
  orgId?: string;
  /** The bearer credential, or a function that returns it (called before every request). */
  auth: string | (() => string | Promise<string>);
  /** The API's address; the client's own when omitted. */
  baseUrl?: string;
  /** A client of createClient(); the package's default client when omitted. */
  client?: Client;
  /** Ends the watch; a request in flight is cancelled. */
  signal?: AbortSignal;
  /**
   * The Date.now() of this caller's previous request for this agent, when a watch
   * resumes one that was stopped: the first request waits until the API's per-caller
   * pace lets it through (3 s after it) instead of drawing a 429.
   */
  lastRequestAt?: number;
  /**
   * onUpdate receives every answer, in order; the next request waits until it settles.
   * Return 'soon' to ask again at the next moment the API allows (3 s after this
   * request, or a 429's Retry-After after its answer when that is later) instead of the
   * normal interval: say, while waiting for a new session's first tab.
   */
  onUpdate(update: ViewUpdate): void | 'soon' | Promise<void | 'soon'>;
  /** onWait is told, before each wait, the Date.now() of the next request (for a countdown). */
  onWait?(nextAt: number): void;
  /**
   * onRequest is told the Date.now() of each request as it is sent, also of one that an
   * abort cancels later: what a resumed watch passes as lastRequestAt.
   */
  onRequest?(at: number): void;
  /** random replaces Math.random for the jitter (tests). */
  random?: () => number;
}

/** sleep resolves true after ms, or false as soon as signal aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve(false);
      return;
    }
    const done = (ok: boolean) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      resolve(ok);
    };
    const onAbort = () => done(false);
    const timer = setTimeout(() => done(true), Math.max(0, ms));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * watchWorkerView polls the agent's browser until the session ends, the API refuses
 * the caller, or options.signal aborts, and resolves with why it ended. It never
 * rejects for a failed request: those are `unavailable` updates and the loop goes on.
 *
 * Its pace keeps within the API's limits: one view per agent per caller every 3 s
 * (callerPaceMs) besides the per-agent gate of one view in 2 s, whoever asks. It asks
 * every 5 s ± 0.5 s (pollIntervalMs ± pollJitterMs), never sooner than 3 s after its
 * previous request, also when onUpdate says 'soon' or a watch resumes with
 * lastRequestAt. It honours a 429's Retry-After, the seconds really left (1–3 of the
 * caller's own pace, 2 when another caller took the agent's window): the next request
 * waits it on top of the normal interval, and a 'soon' one at least that long after the
 * answer (at most maxRetryAfterMs; 2 s when the header is missing or unreadable).
 */
export async function watchWorkerView(options: WatchOptions): Promise<WatchEnd> {
  const { signal } = options;
  const random = options.random ?? Math.random;
  let nextAt = options.lastRequestAt === undefined ? Date.now() : options.lastRequestAt + callerPaceMs;
  for (;;) {
    if (nextAt > Date.now()) {
      options.onWait?.(nextAt);
      if (!(await sleep(nextAt - Date.now(), signal))) {
        return { reason: 'aborted' };
      }
    }
    if (signal?.aborted) {
      return { reason: 'aborted' };
    }
    const at = Date.now();
    options.onRequest?.(at);
    const timeout = AbortSignal.timeout(requestTimeoutMs);
    const auth = options.auth;
    const common = {
      auth: typeof auth === 'string' ? auth : () => auth(),
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      cache: 'no-store' as const,
      ...(options.baseUrl === undefined ? {} : { baseUrl: options.baseUrl }),
      ...(options.client === undefined ? {} : { client: options.client }),
    };
    const { data, error, response } =
      options.orgId === undefined
        ? await WorkerView.getAgentWorkerView({ ...common, path: { id: options.agentId } })
        : await WorkerView.getPartnerWorkerView({ ...common, path: { orgId: options.orgId, id: options.agentId } });
    if (signal?.aborted) {
      return { reason: 'aborted' };
    }
    let update: ViewUpdate;
    if (data !== undefined) {
      update = !data.live ? { kind: 'closed', at } : data.page === null ? { kind: 'noTab', at } : { kind: 'frame', page: data.page, at };
    } else {
      const status = response?.status;
      if (status === 401 || status === 403 || status === 404) {
        const reason = status === 401 ? 'unauthenticated' : status === 403 ? 'forbidden' : 'notFound';
        return { reason, status, error };
      }
      update = { kind: 'unavailable', status, error, at };
    }
    const answeredAt = Date.now();
    const retryAfter = retryAfterMs(response);
    const next = await options.onUpdate(update);
    if (update.kind === 'closed') {
      return { reason: 'closed' };
    }
    nextAt = next === 'soon' ? Math.max(at + callerPaceMs, answeredAt + retryAfter) : at + nextPollDelay(retryAfter, random);
  }
}
