import { client } from './gen/client.gen.js';
import { type Client, type Config } from './gen/client/index.js';
export { client };
export type { Client, Config };
/**
 * createClient makes a client of its own, for another API or other credentials:
 *
 *     const api = createClient({ baseUrl: 'https://api.agentfy.example', auth: orgKey });
 *     await WorkerView.getPartnerWorkerView({ client: api, path: { orgId, id } });
 *
 * It throws a ConfigurationError without an absolute http(s) `baseUrl`.
 */
export declare function createClient(config: Config & {
    baseUrl: string;
}): Client;
