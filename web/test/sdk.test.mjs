// The SDK package (@agentfy/sdk, its committed dist/, the same modules the web app runs)
// used from Node against a replica of the real local stack; then packed with `npm pack`,
// installed into an empty project and run as a partner would: the README's JavaScript
// and examples/partner.mjs. Its types are checked under `tsc --strict` in sdk/.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Agents, WorkerView, nextPollDelay, retryAfterMs, watchWorkerView } from '@agentfy/sdk';
import { repoRoot, startStack } from './harness.mjs';

const run = promisify(execFile);

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

  test("a caller's second request within its 3 s pace gets 429 with the seconds really left in Retry-After", async () => {
    // A live session (the gate is met only by an agent that has one): the agent without a
    // tab, which no other test of this file polls.
    const call = async () => {
      const sent = Date.now();
      const result = await WorkerView.getAgentWorkerView({ baseUrl, auth: r.tokens.member, path: { id: r.emptyAgent } });
      return { ...result, sent, answered: Date.now() };
    };
    const first = await passGate(call);
    assert.equal(first.response.status, 200);
    const { data, error, response, sent, answered } = await call();
    assert.equal(response.status, 429);
    assert.equal(data, undefined);
    assert.equal(error.error.code, 'rate_limited');
    // The pace was taken while the first request was served and read while the second
    // was: what was left of it then lies between these bounds, rounded up to seconds.
    const paceMs = 3_000;
    const most = Math.ceil((paceMs - (sent - first.answered)) / 1_000);
    const least = Math.max(1, Math.ceil((paceMs - (answered - first.sent)) / 1_000));
    const retryAfter = Number(response.headers.get('Retry-After'));
    assert.ok(retryAfter >= least && retryAfter <= most, `Retry-After ${retryAfter}, expected ${least}..${most}`);
  });

  test('a member and a partner polling one agent with the documented loop both get frames, neither locked out', async () => {
    // The loop of sdk/README.md: a request, then a wait of 5 s ± 0.5 s, and after a 429
    // its Retry-After on top. Without that two 5-s pollers within 2 s of each other
    // would stay so, and the later one would get 429 on every poll. Both poll until each
    // has 5 frames (about 30 s); the deadline leaves room for a loaded machine, whose
    // captures may answer 503 now and then.
    const wantFrames = 5;
    const deadline = Date.now() + 120_000;
    const member = { frames: 0, limited: 0, other: 0 };
    const partner = { frames: 0, limited: 0, other: 0 };
    const done = () => member.frames >= wantFrames && partner.frames >= wantFrames;
    const finished = new AbortController();
    async function poll(seen, call) {
      while (!done() && Date.now() < deadline) {
        const { data, response } = await call();
        if (response?.status === 200 && data?.page) seen.frames++;
        else if (response?.status === 429) seen.limited++;
        else seen.other++;
        if (done()) {
          finished.abort(); // the other poller stops waiting too
        } else {
          await delay(nextPollDelay(retryAfterMs(response)), undefined, { signal: finished.signal }).catch(() => {});
        }
      }
    }
    await Promise.all([
      poll(member, () => WorkerView.getAgentWorkerView({ baseUrl, auth: r.tokens.member, path: { id: r.agent } })),
      poll(partner, () => WorkerView.getPartnerWorkerView({ baseUrl, auth: r.orgKeys.reader, path: { orgId: r.orgId, id: r.agent } })),
    ]);
    assert.ok(member.frames >= wantFrames && partner.frames >= wantFrames, `member ${JSON.stringify(member)}, partner ${JSON.stringify(partner)}`);
  });
});

describe('the rest of the package against a replica', () => {
  test('Agents.listAgents lists the member\'s agents with their status', async () => {
    const { data, error, response } = await Agents.listAgents({ baseUrl, auth: r.tokens.member });
    assert.equal(response.status, 200, JSON.stringify(error));
    assert.equal(response.headers.get('Cache-Control'), 'no-store');
    const byId = Object.fromEntries(data.agents.map((a) => [a.id, a]));
    assert.deepEqual(byId[r.agent] && { status: byId[r.agent].status, live: byId[r.agent].live }, { status: 'running', live: true });
    assert.equal(byId[r.idleAgent]?.live, false);
    assert.equal(byId[r.foreignAgent], undefined);
    const key = await Agents.listAgents({ baseUrl, auth: r.orgKeys.reader });
    assert.equal(key.response.status, 401);
    assert.equal(key.error.error.code, 'unauthenticated');
  });

  test('watchWorkerView brings frames of a browsing agent and ends on abort', async () => {
    const stop = new AbortController();
    const kinds = [];
    const end = await watchWorkerView({
      baseUrl,
      auth: r.orgKeys.reader,
      orgId: r.orgId,
      agentId: r.agent,
      signal: stop.signal,
      onUpdate(u) {
        kinds.push(u.kind);
        if (kinds.filter((k) => k === 'frame').length === 2) stop.abort();
      },
    });
    assert.deepEqual(end, { reason: 'aborted' });
    assert.ok(kinds.every((k) => k === 'frame' || k === 'unavailable'), JSON.stringify(kinds));
  });

  test('watchWorkerView ends with closed for an agent without a session, and notFound for another team\'s', async () => {
    const closed = await watchWorkerView({ baseUrl, auth: r.tokens.member, agentId: r.idleAgent, lastRequestAt: Date.now(), onUpdate() {} });
    assert.deepEqual(closed, { reason: 'closed' });
    const hidden = await watchWorkerView({ baseUrl, auth: r.tokens.member, agentId: r.foreignAgent, onUpdate() {} });
    assert.equal(hidden.reason, 'notFound');
  });
});

describe('the packed package in an empty project, from plain JavaScript', () => {
  let project;
  before(async () => {
    project = await mkdtemp(join(tmpdir(), 'agentfy-partner-'));
    const sdk = join(repoRoot, 'sdk');
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', project], { cwd: sdk, timeout: 120_000 });
    const [{ filename, files }] = JSON.parse(stdout);
    const paths = files.map((f) => f.path);
    assert.ok(paths.includes('dist/index.js') && paths.includes('dist/index.d.ts') && paths.includes('README.md'), paths.join(' '));
    assert.ok(!paths.some((p) => p.startsWith('src/') || p.startsWith('test/') || p.startsWith('node_modules/')), paths.join(' '));
    await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'partner', private: true, type: 'module' }));
    await run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', join(project, filename)], { cwd: project, timeout: 120_000 });
  });
  after(async () => {
    if (project) await rm(project, { recursive: true, force: true });
  });

  const partnerEnv = () => ({
    ...process.env,
    AGENTFY_URL: baseUrl,
    AGENTFY_ORG: r.orgId,
    AGENTFY_AGENT: r.agent,
    AGENTFY_ORG_KEY: r.orgKeys.reader,
  });

  test("the SDK README's JavaScript saves a frame", async () => {
    const readme = await readFile(join(repoRoot, 'sdk', 'README.md'), 'utf8');
    const blocks = [...readme.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
    assert.equal(blocks.length, 1, 'one JavaScript snippet in sdk/README.md');
    await writeFile(join(project, 'partner.mjs'), blocks[0]);
    // The gate lets one view per agent in 2 s through: ask until one passes (at most 4 times).
    let out;
    for (let attempt = 0; attempt < 4; attempt++) {
      try {
        out = await run('node', ['partner.mjs'], { cwd: project, env: partnerEnv(), timeout: 60_000 });
        break;
      } catch (err) {
        if (!/429 rate_limited/.test(err.stderr)) throw err;
        await delay(2_000);
      }
    }
    assert.match(out.stdout, /^saved frame\.jpg: .+ — http/m);
    const jpeg = await readFile(join(project, 'frame.jpg'));
    assert.deepEqual([...jpeg.subarray(0, 3)], [0xff, 0xd8, 0xff]);
  });

  test('examples/partner.mjs watches until it has two frames', async () => {
    await writeFile(join(project, 'watch.mjs'), await readFile(join(repoRoot, 'sdk', 'examples', 'partner.mjs')));
    const { stdout } = await run('node', ['watch.mjs'], { cwd: project, env: { ...partnerEnv(), AGENTFY_FRAMES: '2' }, timeout: 90_000 });
    assert.match(stdout, /^done: aborted, 2 frame\(s\)$/m, stdout);
    assert.ok((await readdir(project)).includes('frame.jpg'));
  });

  test('a call without a base URL fails clearly', async () => {
    await writeFile(join(project, 'nobase.mjs'), "import { WorkerView } from '@agentfy/sdk';\nawait WorkerView.getAgentWorkerView({ path: { id: 'a' } });\n");
    await assert.rejects(run('node', ['nobase.mjs'], { cwd: project, timeout: 30_000 }), (err) => /ConfigurationError: @agentfy\/sdk: no baseUrl/.test(err.stderr));
  });
});
