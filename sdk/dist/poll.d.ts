import type { Client } from './gen/client/index.js';
import type { ErrorBody, WorkerPage } from './gen/types.gen.js';
/** pollIntervalMs is the mean time between two requests. */
export declare const pollIntervalMs = 5000;
/** pollJitterMs spreads each wait over pollIntervalMs ± pollJitterMs. */
export declare const pollJitterMs = 500;
/** callerPaceMs is the least time between two requests of one caller for one agent. */
export declare const callerPaceMs = 3000;
/** maxRetryAfterMs bounds what a Retry-After header may add to a wait. */
export declare const maxRetryAfterMs = 60000;
/** requestTimeoutMs bounds one request (the API answers within about 10 s). */
export declare const requestTimeoutMs = 20000;
/**
 * nextPollDelay draws the wait before the next request, in ms: the normal interval with
 * its jitter, plus what a 429 asked for.
 */
export declare function nextPollDelay(retryAfter?: number, random?: () => number): number;
/** retryAfterMs reads a 429's Retry-After (seconds) in ms; 0 for any other answer. */
export declare function retryAfterMs(response: Response | undefined): number;
/** What one answer said. `at` is the Date.now() at which its request was sent. */
export type ViewUpdate = 
/** A frame of the agent's current tab. */
{
    kind: 'frame';
    page: WorkerPage;
    at: number;
}
/** The browser runs but has no tab open. */
 | {
    kind: 'noTab';
    at: number;
}
/**
 * No frame this time, but the browser may well be open: keep showing the last frame.
 * `status` is the HTTP status (429, 503, …), undefined when no answer arrived; `error`
 * says why (`rate_limited`, `unavailable`, `network`, `timeout`, `bad_response`, …).
 */
 | {
    kind: 'unavailable';
    status: number | undefined;
    error: ErrorBody;
    at: number;
}
/** `{"live":false}`: no running or idle session. The watch ends after this update. */
 | {
    kind: 'closed';
    at: number;
};
/** Why a watch ended. */
export type WatchEnd = {
    reason: 'closed';
} | {
    reason: 'aborted';
}
/** The API refused the credential (401), the key's scope (403) or the agent (404). */
 | {
    reason: 'unauthenticated' | 'forbidden' | 'notFound';
    status: 401 | 403 | 404;
    error: ErrorBody;
};
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
export declare function watchWorkerView(options: WatchOptions): Promise<WatchEnd>;
