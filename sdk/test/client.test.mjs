// The package's own logic, against a stub fetch: the base URL rule, the one error shape,
// and watchWorkerView's cadence and endings (with mocked timers, so 5-s waits take no
// time). The same code against a real stack: web/test/sdk.test.mjs and
// web/test/sdk-package.test.mjs.

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { once } from 'node:events';
import { afterEach, describe, mock, test } from 'node:test';
import {
  Agents,
  ConfigurationError,
  WorkerView,
  callerPaceMs,
  createClient,
  isClientError,
  watchWorkerView,
} from '../dist/index.js';

const json = (status, body, headers = {}) =>
  new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', ...headers } });
const page = { url: 'https://example.com/', title: 'Example', capturedAt: '2026-11-30T12:00:00.000Z', contentType: 'image/jpeg', data: '/9j/2Q==' };

/** stubClient answers each request with the next of answers (a Response or a thrown error). */
function stubClient(answers) {
  const requests = [];
  const fetch = async (request) => {
    requests.push(request);
    const next = answers.shift();
    if (next === undefined) {
      throw new Error('no more answers');
    }
    if (next instanceof Error) {
      throw next;
    }
    return typeof next === 'function' ? next(request) : next;
  };
  return { client: createClient({ baseUrl: 'http://api.test', fetch }), requests };
}

describe('clients', () => {
  test('a call without a base URL throws a ConfigurationError', async () => {
    await assert.rejects(WorkerView.getAgentWorkerView({ path: { id: 'a' } }), ConfigurationError);
    await assert.rejects(WorkerView.getAgentWorkerView({ baseUrl: 'api.agentfy.example', path: { id: 'a' } }), /not an absolute URL/);
    await assert.rejects(WorkerView.getAgentWorkerView({ baseUrl: 'ftp://x', path: { id: 'a' } }), /not http/);
    assert.throws(() => createClient({}), ConfigurationError);
  });

  test('no answer is a network error body, response undefined', async () => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1');
    await once(srv, 'listening');
    const { port } = srv.address();
    srv.close();
    await once(srv, 'close');
    const { data, error, response } = await WorkerView.getAgentWorkerView({ baseUrl: `http://127.0.0.1:${port}`, path: { id: 'a' } });
    assert.equal(data, undefined);
    assert.equal(response, undefined);
    assert.equal(error.error.code, 'network');
    assert.match(error.error.message, /no answer from the API/);
    assert.ok(isClientError(error));
  });

  test('an aborted call and a timed-out call say so', async () => {
    const srv = createServer(() => {}); // never answers
    srv.listen(0, '127.0.0.1');
    await once(srv, 'listening');
    try {
      const baseUrl = `http://127.0.0.1:${srv.address().port}`;
      const ac = new AbortController();
      const pending = WorkerView.getAgentWorkerView({ baseUrl, path: { id: 'a' }, signal: ac.signal });
      ac.abort();
      assert.equal((await pending).error.error.code, 'aborted');
      const timed = await WorkerView.getAgentWorkerView({ baseUrl, path: { id: 'a' }, signal: AbortSignal.timeout(50) });
      assert.equal(timed.error.error.code, 'timeout');
    } finally {
      srv.closeAllConnections();
      srv.close();
    }
  });

  test('answers that are not the API JSON are bad_response; API errors pass unchanged', async () => {
    const { client } = stubClient([
      new Response('<html>bad gateway</html>', { status: 502, headers: { 'Content-Type': 'text/html' } }),
      new Response('<html>portal</html>', { status: 200, headers: { 'Content-Type': 'text/html' } }),
      json(200, ['not', 'an', 'object']),
      json(429, { error: { code: 'rate_limited', message: 'later' } }, { 'Retry-After': '2' }),
    ]);
    for (const status of [502, 200, 200]) {
      const r = await WorkerView.getAgentWorkerView({ client, path: { id: 'a' } });
      assert.equal(r.data, undefined);
      assert.equal(r.response.status, status);
      assert.equal(r.error.error.code, 'bad_response', JSON.stringify(r.error));
    }
    const limited = await WorkerView.getAgentWorkerView({ client, path: { id: 'a' } });
    assert.deepEqual(limited.error, { error: { code: 'rate_limited', message: 'later' } });
    assert.equal(isClientError(limited.error), false);
  });

  test('createClient carries the base URL and the credential', async () => {
    const { client, requests } = stubClient([json(200, { agents: [] })]);
    const { data } = await Agents.listAgents({ client, auth: 'jwt-1' });
    assert.deepEqual(data, { agents: [] });
    assert.equal(requests[0].url, 'http://api.test/v1/agents');
    assert.equal(requests[0].headers.get('Authorization'), 'Bearer jwt-1');
  });
});

describe('watchWorkerView', () => {
  afterEach(() => mock.timers.reset());

  /** watch runs a watch over answers with mocked time; waits are recorded, not slept. */
  async function watch(answers, options = {}) {
    mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
    const { client, requests } = stubClient(answers);
    const updates = [];
    const waits = [];
    const end = await watchWorkerView({
      client,
      auth: 'key',
      agentId: 'agent-1',
      random: () => 0.5,
      onWait(nextAt) {
        waits.push(nextAt - Date.now());
        queueMicrotask(() => mock.timers.tick(nextAt - Date.now()));
      },
      onUpdate(u) {
        updates.push(u.kind === 'unavailable' ? `${u.kind}:${u.status}:${u.error.error.code}` : u.kind);
        return options.onUpdate?.(u);
      },
      ...options.watch,
    });
    return { end, updates, waits, requests };
  }

  test('reports each answer, waits 5 s (plus a 429 Retry-After), keeps going on failures and stops on live:false', async () => {
    const { end, updates, waits, requests } = await watch([
      json(200, { live: true, page }),
      json(200, { live: true, page: null }),
      json(429, { error: { code: 'rate_limited', message: 'm' } }, { 'Retry-After': '2' }),
      json(503, { error: { code: 'unavailable', message: 'm' } }),
      new TypeError('fetch failed'),
      json(200, { live: false }),
    ]);
    assert.deepEqual(end, { reason: 'closed' });
    assert.deepEqual(updates, ['frame', 'noTab', 'unavailable:429:rate_limited', 'unavailable:503:unavailable', 'unavailable:undefined:network', 'closed']);
    // random() = 0.5 puts each wait in the middle of 5 s ± 0.5 s; the 429 adds its 2 s.
    assert.deepEqual(waits, [5_000, 5_000, 7_000, 5_000, 5_000]);
    assert.equal(requests.length, 6);
    assert.equal(requests[0].url, 'http://api.test/v1/agents/agent-1/worker/view');
    assert.equal(requests[0].headers.get('Authorization'), 'Bearer key');
  });

  test('503 identity_unavailable (the sign-in service is down) keeps the watch going at the normal interval, never an end', async () => {
    const identity = () => json(503, { error: { code: 'identity_unavailable', message: 'm' } }, { 'Retry-After': '5' });
    const { end, updates, waits } = await watch([json(200, { live: true, page }), identity(), identity(), identity(), json(200, { live: true, page }), json(200, { live: false })]);
    assert.deepEqual(end, { reason: 'closed' });
    assert.deepEqual(updates, [
      'frame',
      'unavailable:503:identity_unavailable',
      'unavailable:503:identity_unavailable',
      'unavailable:503:identity_unavailable',
      'frame',
      'closed',
    ]);
    assert.deepEqual(waits, [5_000, 5_000, 5_000, 5_000, 5_000]);
  });

  test('a frame carries its masked count as the API sent it, and none when none was masked', async () => {
    const frames = [];
    await watch([json(200, { live: true, page: { ...page, masked: 2 } }), json(200, { live: true, page }), json(200, { live: false })], {
      onUpdate: (u) => {
        if (u.kind === 'frame') frames.push(u.page);
      },
    });
    assert.deepEqual(frames, [{ ...page, masked: 2 }, page]);
    assert.equal(frames[1].masked, undefined);
  });

  test('a frame masked whole carries its masked count and the reason as the API sent them, an unknown reason too', async () => {
    const frames = [];
    const hidden = [
      { ...page, masked: 1, hidden: 'motion' },
      { ...page, masked: 4, hidden: 'view_transition' },
      { ...page, masked: 2, hidden: 'a-reason-of-a-later-version' },
    ];
    await watch([...hidden.map((p) => json(200, { live: true, page: p })), json(200, { live: true, page }), json(200, { live: false })], {
      onUpdate: (u) => {
        if (u.kind === 'frame') frames.push(u.page);
      },
    });
    assert.deepEqual(frames, [...hidden, page]);
    assert.equal(frames[3].hidden, undefined);
  });

  test('the partner route with orgId', async () => {
    const { requests } = await watch([json(200, { live: false })], { watch: { orgId: 'org-1' } });
    assert.equal(requests[0].url, 'http://api.test/v1/orgs/org-1/agents/agent-1/worker/view');
  });

  test('401, 403 and 404 end the watch with their reason', async () => {
    for (const [status, reason] of [[401, 'unauthenticated'], [403, 'forbidden'], [404, 'notFound']]) {
      const { end, updates } = await watch([json(200, { live: true, page: null }), json(status, { error: { code: 'x', message: 'm' } })]);
      assert.equal(end.reason, reason);
      assert.equal(end.status, status);
      assert.deepEqual(updates, ['noTab']);
      mock.timers.reset();
    }
  });

  test("'soon' asks again after the caller pace; lastRequestAt delays the first request", async () => {
    const { waits } = await watch([json(200, { live: true, page: null }), json(200, { live: false })], {
      onUpdate: (u) => (u.kind === 'noTab' ? 'soon' : undefined),
      watch: { lastRequestAt: 1_000_000 - 1_000 },
    });
    assert.deepEqual(waits, [callerPaceMs - 1_000, callerPaceMs]);
  });

  test("'soon' after a 429 waits at least its Retry-After", async () => {
    const { waits } = await watch(
      [
        json(429, { error: { code: 'rate_limited', message: 'm' } }, { 'Retry-After': '5' }),
        json(429, { error: { code: 'rate_limited', message: 'm' } }, { 'Retry-After': '1' }),
        json(200, { live: false }),
      ],
      { onUpdate: () => 'soon' },
    );
    // Five seconds asked for: more than the pace. One second: the pace is longer.
    assert.deepEqual(waits, [5_000, callerPaceMs]);
  });

  test('an abort ends the watch during a wait and during a request, with no update after it', async () => {
    const ac = new AbortController();
    mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
    const { client } = stubClient([json(200, { live: true, page: null })]);
    const updates = [];
    const during = watchWorkerView({
      client,
      auth: 'k',
      agentId: 'a',
      signal: ac.signal,
      onUpdate: (u) => void updates.push(u.kind),
      onWait: () => queueMicrotask(() => ac.abort()),
    });
    assert.deepEqual(await during, { reason: 'aborted' });
    assert.deepEqual(updates, ['noTab']);
    mock.timers.reset();

    const ac2 = new AbortController();
    let release;
    const hanging = stubClient([(request) => new Promise((_, reject) => {
      release = () => reject(request.signal.reason);
      request.signal.addEventListener('abort', release);
    })]);
    const updates2 = [];
    const sent = [];
    const started = Date.now();
    const inFlight = watchWorkerView({
      client: hanging.client,
      auth: 'k',
      agentId: 'a',
      signal: ac2.signal,
      onUpdate: (u) => void updates2.push(u.kind),
      onRequest: (at) => void sent.push(at),
    });
    await new Promise((r) => setImmediate(r));
    ac2.abort();
    assert.deepEqual(await inFlight, { reason: 'aborted' });
    assert.deepEqual(updates2, []);
    // The cancelled request was still sent: a resumed watch must count it for the pace.
    assert.equal(sent.length, 1);
    assert.ok(sent[0] >= started && sent[0] <= Date.now(), `${sent[0]} not in [${started}, now]`);
  });
});
