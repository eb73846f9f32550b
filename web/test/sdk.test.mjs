// The generated SDK, used from Node against a replica of the real local stack. It imports
// the committed browser build of sdk/src (plain ES modules, the same code the web app
// runs); its types are checked under `tsc --strict` by sdk/ (npm run typecheck).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { WorkerView } from '../static/js/sdk/src/index.js';
import { nextPollDelay, retryAfterMs } from '../static/js/web/src/poll.js';
import { startStack } from './harness.mjs';

let stack;
let baseUrl;
let r;

before(async () => {
  stack = await startStack();
  r = stack.ready;
  baseUrl = r.replicas[1];
});
after(async () => {
  await stack?.close();
});

const bearer = (token) => ({ Authorization: `Bearer ${token}` });

/**
 * passGate calls a view method and, on 429, waits for the Retry-After the API asks for
 * before trying again: the per-agent gate lets one request in 2 s through, and the
 * tests of one agent follow each other quickly.
 */
async function passGate(call) {
  for (let attempt = 0; ; attempt++) {
    const result = await call();
    if (result.response.status !== 429 || attempt === 3) {
      return result;
    }
    await delay(Number(result.response.headers.get('Retry-After')) * 1000);
  }
}

describe('WorkerView SDK against a replica', () => {
  test('getAgentWorkerView returns a frame of a browsing agent', async () => {
    const { data, error, response } = await passGate(() =>
      WorkerView.getAgentWorkerView({ baseUrl, headers: bearer(r.tokens.member), path: { id: r.agent } }),
    );
    assert.equal(response.status, 200, JSON.stringify(error));
    assert.equal(response.headers.get('Cache-Control'), 'no-store');
    assert.equal(data.live, true);
    assert.deepEqual(Object.keys(data.page).sort(), ['capturedAt', 'contentType', 'data', 'title', 'url']);
    assert.equal(data.page.contentType, 'image/jpeg');
    assert.match(data.page.capturedAt, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    assert.ok(data.page.url.startsWith(r.site), data.page.url);
    const jpeg = Buffer.from(data.page.data, 'base64');
    assert.deepEqual([...jpeg.subarray(0, 3)], [0xff, 0xd8, 0xff]);
    assert.deepEqual([...jpeg.subarray(-2)], [0xff, 0xd9]);
  });

  test('getAgentWorkerView says page null for a live session without a tab', async () => {
    const { data, response } = await passGate(() =>
      WorkerView.getAgentWorkerView({ baseUrl, auth: r.tokens.member, path: { id: r.emptyAgent } }),
    );
    assert.equal(response.status, 200);
    assert.deepEqual(data, { live: true, page: null });
  });

  test('getAgentWorkerView says live false for an agent without a session', async () => {
    const { data, response } = await passGate(() =>
      WorkerView.getAgentWorkerView({ baseUrl, headers: bearer(r.tokens.member), path: { id: r.idleAgent } }),
    );
    assert.equal(response.status, 200);
    assert.deepEqual(data, { live: false });
  });

  test('getPartnerWorkerView returns a frame with the reader key', async () => {
    const { data, response } = await passGate(() =>
      WorkerView.getPartnerWorkerView({ baseUrl, headers: bearer(r.orgKeys.reader), path: { orgId: r.orgId, id: r.agent } }),
    );
    assert.equal(response.status, 200);
    assert.equal(data.live, true);
    assert.equal(data.page.contentType, 'image/jpeg');
  });

  test('getPartnerWorkerView answers the other shapes too', async () => {
    const quill = await passGate(() =>
      WorkerView.getPartnerWorkerView({ baseUrl, headers: bearer(r.orgKeys.reader), path: { orgId: r.orgId, id: r.emptyAgent } }),
    );
    assert.deepEqual(quill.data, { live: true, page: null });
    const ledger = await passGate(() =>
      WorkerView.getPartnerWorkerView({ baseUrl, headers: bearer(r.orgKeys.reader), path: { orgId: r.orgId, id: r.idleAgent } }),
    );
    assert.deepEqual(ledger.data, { live: false });
  });

  test('errors come back as the error body, with no data', async (t) => {
    const cases = [
      { name: 'no token', call: () => WorkerView.getAgentWorkerView({ baseUrl, path: { id: r.idleAgent } }), want: 401 },
      { name: 'outsider', call: () => WorkerView.getAgentWorkerView({ baseUrl, auth: r.tokens.outsider, path: { id: r.idleAgent } }), want: 404 },
      { name: 'foreign agent', call: () => WorkerView.getAgentWorkerView({ baseUrl, auth: r.tokens.member, path: { id: r.foreignAgent } }), want: 404 },
      { name: 'key without scope', call: () => WorkerView.getPartnerWorkerView({ baseUrl, auth: r.orgKeys.noScope, path: { orgId: r.orgId, id: r.idleAgent } }), want: 403 },
      { name: 'key of another org', call: () => WorkerView.getPartnerWorkerView({ baseUrl, auth: r.orgKeys.otherOrg, path: { orgId: r.orgId, id: r.idleAgent } }), want: 404 },
    ];
    for (const c of cases) {
      await t.test(c.name, async () => {
        const { data, error, response } = await c.call();
        assert.equal(response.status, c.want);
        assert.equal(data, undefined);
        assert.equal(typeof error.error.code, 'string');
        assert.equal(typeof error.error.message, 'string');
        assert.equal(response.headers.get('Cache-Control'), 'no-store');
      });
    }
  });

  test('a second request within 2 s gets 429 with Retry-After: 2', async () => {
    const call = () => WorkerView.getAgentWorkerView({ baseUrl, auth: r.tokens.member, path: { id: r.idleAgent } });
    await passGate(call);
    const { data, error, response } = await call();
    assert.equal(response.status, 429);
    assert.equal(response.headers.get('Retry-After'), '2');
    assert.equal(data, undefined);
    assert.equal(typeof error.error.code, 'string');
  });

  test('a member and a partner polling one agent with the documented loop for 60 s each get frames', async () => {
    // The loop of sdk/README.md: a request, then a wait of 5 s ± 0.5 s, and after a 429
    // its Retry-After on top. Without that two 5-s pollers within 2 s of each other
    // would stay so, and the later one would get 429 on every poll.
    const until = Date.now() + 60_000;
    async function poll(call) {
      const seen = { frames: 0, limited: 0, other: 0 };
      while (Date.now() < until) {
        const { data, response } = await call();
        if (response?.status === 200 && data?.page) seen.frames++;
        else if (response?.status === 429) seen.limited++;
        else seen.other++;
        await delay(nextPollDelay(retryAfterMs(response)));
      }
      return seen;
    }
    const [member, partner] = await Promise.all([
      poll(() => WorkerView.getAgentWorkerView({ baseUrl, auth: r.tokens.member, path: { id: r.agent } })),
      poll(() => WorkerView.getPartnerWorkerView({ baseUrl, auth: r.orgKeys.reader, path: { orgId: r.orgId, id: r.agent } })),
    ]);
    assert.ok(member.frames >= 5 && partner.frames >= 5, `member ${JSON.stringify(member)}, partner ${JSON.stringify(partner)}`);
  });
});
