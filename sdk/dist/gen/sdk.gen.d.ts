import type { Client, ClientMeta, Options as Options2, RequestResult, TDataShape } from './client/index.js';
import type { GetAgentWorkerViewData, GetAgentWorkerViewErrors, GetAgentWorkerViewResponses, GetPartnerWorkerViewData, GetPartnerWorkerViewErrors, GetPartnerWorkerViewResponses, ListAgentsData, ListAgentsErrors, ListAgentsResponses } from './types.gen.js';
export type Options<TData extends TDataShape = TDataShape, ThrowOnError extends boolean = boolean, TResponse = unknown> = Options2<TData, ThrowOnError, TResponse> & {
    /**
     * You can provide a client instance returned by `createClient()` instead of
     * individual options. This might be also useful if you want to implement a
     * custom client.
     */
    client?: Client;
    /**
     * You can pass arbitrary values through the `meta` object. This can be
     * used to access values that aren't defined as part of the SDK function.
     */
    meta?: keyof ClientMeta extends never ? Record<string, unknown> : ClientMeta;
};
export declare class Agents {
    /**
     * The agents of the signed-in member's teams, with their session status
     *
     * Accepts a human JWT only (an organisation key is not a member of a team: 401).
     * Every agent of every team the user belongs to, sorted by id, at most 500, each
     * with its session's status now: `running` or `idle` (`live: true`, the browser
     * view can answer) or `stopped` (`live: false`).
     *
     */
    static listAgents<ThrowOnError extends boolean = false>(options?: Options<ListAgentsData, ThrowOnError>): RequestResult<ListAgentsResponses, ListAgentsErrors, ThrowOnError>;
}
export declare class WorkerView {
    /**
     * Snapshot of an agent's browser, for a member of its team
     *
     * Accepts a human JWT of any member of the agent's team. An unknown agent and an
     * agent of another team both answer 404 with the same body.
     *
     */
    static getAgentWorkerView<ThrowOnError extends boolean = false>(options: Options<GetAgentWorkerViewData, ThrowOnError>): RequestResult<GetAgentWorkerViewResponses, GetAgentWorkerViewErrors, ThrowOnError>;
    /**
     * Snapshot of an agent's browser, for a partner organisation
     *
     * Accepts the organisation's API key with scope `worker:logs:read`, with the same
     * ownership and environment checks as worker logs: a key of another organisation or
     * environment answers 404; a key without the scope answers 403.
     *
     */
    static getPartnerWorkerView<ThrowOnError extends boolean = false>(options: Options<GetPartnerWorkerViewData, ThrowOnError>): RequestResult<GetPartnerWorkerViewResponses, GetPartnerWorkerViewErrors, ThrowOnError>;
}
