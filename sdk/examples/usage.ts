// How a TypeScript caller uses the package, type-checked under --strict (npm run
// typecheck), so a change of the document that breaks callers shows up here. Every
// shape of an answer is handled.

import {
  Agents,
  WorkerView,
  createClient,
  isClientError,
  watchWorkerView,
  type AgentSummary,
  type ErrorBody,
  type WorkerPage,
} from '@agentfy/sdk';

/** What a caller makes of one view. */
export type Snapshot =
  | { kind: 'frame'; page: WorkerPage }
  | { kind: 'noTab' }
  | { kind: 'closed' }
  /** The API refused (401/403/404): asking again will not help. */
  | { kind: 'refused'; status: number; error: ErrorBody }
  /** 429, 503 or no answer at all: keep the last frame and ask again later. */
  | { kind: 'retry'; status: number | undefined; error: ErrorBody };

/** partnerSnapshot asks once for the agent's browser with an organisation key. */
export async function partnerSnapshot(baseUrl: string, orgKey: string, orgId: string, agentId: string): Promise<Snapshot> {
  const api = createClient({ baseUrl, auth: orgKey });
  const { data, error, response } = await WorkerView.getPartnerWorkerView({ client: api, path: { orgId, id: agentId } });
  if (error !== undefined) {
    const status = response?.status; // undefined when no answer arrived (error.error.code 'network' or 'timeout')
    if (status === 401 || status === 403 || status === 404) {
      return { kind: 'refused', status, error };
    }
    return { kind: 'retry', status, error };
  }
  if (!data.live) {
    return { kind: 'closed' };
  }
  return data.page === null ? { kind: 'noTab' } : { kind: 'frame', page: data.page };
}

/** describe says a failure in words, telling the API's answers from the call's own. */
export function describe(error: ErrorBody): string {
  return isClientError(error) ? `no usable answer (${error.error.code}): ${error.error.message}` : `the API said ${error.error.code}`;
}

/** memberAgents lists what a member may watch, live sessions first. */
export async function memberAgents(baseUrl: string, jwt: string): Promise<AgentSummary[]> {
  const { data, error } = await Agents.listAgents({ baseUrl, auth: jwt });
  if (error !== undefined) {
    throw new Error(describe(error));
  }
  return [...data.agents].sort((a, b) => Number(b.live) - Number(a.live));
}

/** watchForAMinute shows frames of one agent for a minute, keeping the last on failures. */
export async function watchForAMinute(baseUrl: string, jwt: string, agentId: string, show: (page: WorkerPage) => void): Promise<string> {
  const end = await watchWorkerView({
    baseUrl,
    auth: jwt,
    agentId,
    signal: AbortSignal.timeout(60_000),
    onUpdate(update) {
      if (update.kind === 'frame') {
        show(update.page);
      }
    },
  });
  return end.reason;
}

export function misuse(): void {
  // @ts-expect-error the path needs the agent's id
  void WorkerView.getAgentWorkerView({ path: {} });
  // @ts-expect-error the partner route needs the organisation too
  void WorkerView.getPartnerWorkerView({ path: { id: 'agent-scout' } });
  // @ts-expect-error createClient needs a base URL
  createClient({});
}
