export type ClientOptions = {
    baseUrl: 'http://localhost:8080' | (string & {});
};
export type AgentList = {
    agents: Array<AgentSummary>;
};
export type AgentSummary = {
    id: string;
    name: string;
    status: 'running' | 'idle' | 'stopped';
    /**
     * true while the session is running or idle
     */
    live: boolean;
};
export type WorkerViewBody = WorkerViewClosed | WorkerViewLive;
export type WorkerViewClosed = {
    live: false;
};
export type WorkerViewLive = {
    live: true;
    page: WorkerPage | null;
};
export type WorkerPage = {
    /**
     * The tab's URL.
     */
    url: string;
    /**
     * The tab's title.
     */
    title: string;
    /**
     * UTC, milliseconds.
     */
    capturedAt: string;
    contentType: 'image/jpeg';
    /**
     * The JPEG viewport (quality 60, at most 1280 px wide and 2000 CSS px tall before scaling), base64.
     */
    data: string;
    /**
     * How many regions of the frame the broker painted over with opaque masks before
     * sealing it: password, payment and one-time-code fields, and regions a site marks
     * private for session-replay tools. Absent when none was masked.
     */
    masked?: number;
    /**
     * Why the broker masked the whole frame instead of only its secret regions: it
     * could not tell where a secret was painted, so the frame shows none of the page,
     * and `masked` (at least 1) still counts the secret regions. Absent when the frame
     * shows the page.
     *
     * - `motion`: the page moved a secret while it was captured, in a way no mask
     * could follow.
     * - `changed`: a secret appeared on the page or left it while it was captured.
     * - `view_transition`: a view transition was running, painting images of the
     * page as it was.
     * - `ink`: a secret was painted where a mask of its own cannot be placed (an
     * SVG filter, a 3-D perspective, a far shadow).
     *
     * A later version may add reasons: show an unknown one as the whole frame hidden.
     */
    hidden?: 'motion' | 'changed' | 'view_transition' | 'ink';
};
/**
 * Every error. The SDK also returns this shape for failures that never reached the
 * API (see the SDK's README): `code` is then `network`, `aborted` or `bad_response`.
 *
 */
export type ErrorBody = {
    error: {
        code: string;
        message: string;
    };
};
export type AgentId = string;
export type ListAgentsData = {
    body?: never;
    path?: never;
    query?: never;
    url: '/v1/agents';
};
export type ListAgentsErrors = {
    /**
     * A request that could be read two ways, refused before anything else is checked:
     * two `Authorization` headers (send one credential), or an encoded slash (`%2F`) in
     * the path (no id contains `/`).
     *
     */
    400: ErrorBody;
    /**
     * No valid credential.
     */
    401: ErrorBody;
    /**
     * Redis failed, or the identity provider does not answer (`identity_unavailable`,
     * with Retry-After); retry later. Never a reason to sign the user out.
     *
     */
    503: ErrorBody;
};
export type ListAgentsError = ListAgentsErrors[keyof ListAgentsErrors];
export type ListAgentsResponses = {
    /**
     * The agents.
     */
    200: AgentList;
};
export type ListAgentsResponse = ListAgentsResponses[keyof ListAgentsResponses];
export type GetAgentWorkerViewData = {
    body?: never;
    path: {
        id: string;
    };
    query?: never;
    url: '/v1/agents/{id}/worker/view';
};
export type GetAgentWorkerViewErrors = {
    /**
     * A request that could be read two ways, refused before anything else is checked:
     * two `Authorization` headers (send one credential), or an encoded slash (`%2F`) in
     * the path (no id contains `/`).
     *
     */
    400: ErrorBody;
    /**
     * No valid credential.
     */
    401: ErrorBody;
    /**
     * Unknown agent, or one the caller may not see (the same body for both).
     */
    404: ErrorBody;
    /**
     * Another view of this agent passed less than 2 seconds ago, or this caller (a user
     * or an organisation key) asked for this agent less than 3 seconds ago. Only a
     * request that finds a running or idle session meets this limit.
     *
     */
    429: ErrorBody;
    /**
     * The frame could not be had now (no worker channel, Redis or NATS failure, an older
     * worker image, a refused grant, a busy broker, a capture failure, or a reply
     * that did not open). Retry at the normal interval; this is not a closed browser.
     * With `code` `identity_unavailable` (and Retry-After) the human token could not be
     * checked because the identity provider does not answer: the token may well be
     * good, so this is never a sign-out (401 is).
     *
     */
    503: ErrorBody;
};
export type GetAgentWorkerViewError = GetAgentWorkerViewErrors[keyof GetAgentWorkerViewErrors];
export type GetAgentWorkerViewResponses = {
    /**
     * `{"live":false}`: no running or idle session (also when it stopped during the
     * capture). `{"live":true,"page":null}`: the worker has no tab open.
     * `{"live":true,"page":{…}}`: a frame, with `masked` when the broker masked secret
     * regions of it, and `hidden` besides when it masked the whole frame. No success
     * wrapper.
     *
     */
    200: WorkerViewBody;
};
export type GetAgentWorkerViewResponse = GetAgentWorkerViewResponses[keyof GetAgentWorkerViewResponses];
export type GetPartnerWorkerViewData = {
    body?: never;
    path: {
        orgId: string;
        id: string;
    };
    query?: never;
    url: '/v1/orgs/{orgId}/agents/{id}/worker/view';
};
export type GetPartnerWorkerViewErrors = {
    /**
     * A request that could be read two ways, refused before anything else is checked:
     * two `Authorization` headers (send one credential), or an encoded slash (`%2F`) in
     * the path (no id contains `/`).
     *
     */
    400: ErrorBody;
    /**
     * No valid credential.
     */
    401: ErrorBody;
    /**
     * The organisation key lacks `worker:logs:read`.
     */
    403: ErrorBody;
    /**
     * Unknown agent, or one the caller may not see (the same body for both).
     */
    404: ErrorBody;
    /**
     * Another view of this agent passed less than 2 seconds ago, or this caller (a user
     * or an organisation key) asked for this agent less than 3 seconds ago. Only a
     * request that finds a running or idle session meets this limit.
     *
     */
    429: ErrorBody;
    /**
     * The frame could not be had now (no worker channel, Redis or NATS failure, an older
     * worker image, a refused grant, a busy broker, a capture failure, or a reply
     * that did not open). Retry at the normal interval; this is not a closed browser.
     * With `code` `identity_unavailable` (and Retry-After) the human token could not be
     * checked because the identity provider does not answer: the token may well be
     * good, so this is never a sign-out (401 is).
     *
     */
    503: ErrorBody;
};
export type GetPartnerWorkerViewError = GetPartnerWorkerViewErrors[keyof GetPartnerWorkerViewErrors];
export type GetPartnerWorkerViewResponses = {
    /**
     * `{"live":false}`: no running or idle session (also when it stopped during the
     * capture). `{"live":true,"page":null}`: the worker has no tab open.
     * `{"live":true,"page":{…}}`: a frame, with `masked` when the broker masked secret
     * regions of it, and `hidden` besides when it masked the whole frame. No success
     * wrapper.
     *
     */
    200: WorkerViewBody;
};
export type GetPartnerWorkerViewResponse = GetPartnerWorkerViewResponses[keyof GetPartnerWorkerViewResponses];
