// The package's clients: `client`, the default one every method uses unless told
// otherwise, and `createClient` for more. Both refuse a call without an absolute http(s)
// base URL, parse every answer as JSON, and return every failure as an error body
// (errors.ts).

import { client } from './gen/client.gen.js';
import { type Client, type Config, createClient as createGeneratedClient } from './gen/client/index.js';
import { ConfigurationError, toErrorBody } from './errors.js';

export { client };
export type { Client, Config };

/** checkBaseUrl throws a ConfigurationError unless url is an absolute http(s) URL. */
function checkBaseUrl(url: unknown): void {
  if (typeof url !== 'string' || url === '') {
    throw new ConfigurationError(
      "@agentfy/sdk: no baseUrl: pass the API's address to createClient({ baseUrl }), client.setConfig({ baseUrl }) or the call, e.g. 'https://api.agentfy.example'",
    );
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigurationError(`@agentfy/sdk: baseUrl ${JSON.stringify(url)} is not an absolute URL`);
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') {
    throw new ConfigurationError(`@agentfy/sdk: baseUrl ${JSON.stringify(url)} is not http(s)`);
  }
}

/** A 2xx answer must be a JSON object; anything else is a bad_response. */
async function requireObject(data: unknown): Promise<unknown> {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    throw new TypeError('a 2xx answer that is not a JSON object');
  }
  return data;
}

/** configure gives a client the package's rules: its base URL check, JSON, error bodies. */
function configure(c: Client): Client {
  c.setConfig({
    parseAs: 'json',
    requestValidator: async (opts: unknown) => checkBaseUrl((opts as { baseUrl?: unknown }).baseUrl),
    responseValidator: requireObject,
  });
  c.interceptors.error.use((err, response) => toErrorBody(err, response));
  return c;
}

configure(client);

/**
 * createClient makes a client of its own, for another API or other credentials:
 *
 *     const api = createClient({ baseUrl: 'https://api.agentfy.example', auth: orgKey });
 *     await WorkerView.getPartnerWorkerView({ client: api, path: { orgId, id } });
 *
 * It throws a ConfigurationError without an absolute http(s) `baseUrl`.
 */
export function createClient(config: Config & { baseUrl: string }): Client {
  checkBaseUrl(config?.baseUrl);
  return configure(createGeneratedClient(config));
}
