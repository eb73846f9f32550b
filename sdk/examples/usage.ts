// How a partner calls the SDK. Type-checked under --strict with the generated code
// (npm run typecheck), so a change of the document that breaks callers shows up here.

import { WorkerView, type WorkerPage } from '../src/index.js';

/** What a caller makes of one view: a frame, an open browser with no tab, or closed. */
export type Snapshot = { kind: 'frame'; page: WorkerPage } | { kind: 'noTab' } | { kind: 'closed' };

/**
 * partnerSnapshot asks for the agent's browser with an organisation key. It throws on
 * 401/403/404 and on 429/503: the caller retries those at its normal interval and never
 * reports them as a closed browser.
 */
export async function partnerSnapshot(baseUrl: string, orgKey: string, orgId: string, agentId: string): Promise<Snapshot> {
  const { data, error, response } = await WorkerView.getPartnerWorkerView({
    baseUrl,
    headers: { Authorization: `Bearer ${orgKey}` },
    path: { orgId, id: agentId },
  });
  if (data === undefined) {
    throw new Error(`worker view: ${response?.status ?? 'network'} ${error.error.code}`);
  }
  // `data` is the body itself: no success wrapper.
  if (!data.live) {
    return { kind: 'closed' };
  }
  return data.page === null ? { kind: 'noTab' } : { kind: 'frame', page: data.page };
}

/** memberFrameAge tells how old a member's frame is, in milliseconds, or null without one. */
export async function memberFrameAge(baseUrl: string, jwt: string, agentId: string, now: Date): Promise<number | null> {
  const { data } = await WorkerView.getAgentWorkerView({ baseUrl, auth: jwt, path: { id: agentId } });
  if (data?.live && data.page) {
    const page: WorkerPage = data.page;
    return now.getTime() - Date.parse(page.capturedAt);
  }
  return null;
}

export function misuse(): void {
  // @ts-expect-error the path needs the agent's id
  void WorkerView.getAgentWorkerView({ path: {} });
  // @ts-expect-error the partner route needs the organisation too
  void WorkerView.getPartnerWorkerView({ path: { id: 'agent-scout' } });
}
