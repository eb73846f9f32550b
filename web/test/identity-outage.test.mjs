// The «Браузер агента» window through an outage of the identity provider (issue 35): the
// stack takes tokens from a JWK set server of the test's own (AGENTFY_JWT_JWKS_URL, with
// a 10-s staleness bound) beside its development ones; the window is open with one of
// that provider's tokens. The provider stops: once the last keys are older than the
// bound, the API answers 503 identity_unavailable, and the window keeps its last frame,
// says «Сервис входа не отвечает», and stays signed in — a 401 would have signed the
// user out. The provider comes back on the same address: frames again, nobody doing
// anything. Everything real: the local stack, its replicas' verifier, Chromium.
//
// Every wait is for the event that matters, with a deadline.

import assert from 'node:assert/strict';
import { generateKeyPairSync, sign } from 'node:crypto';
import { once } from 'node:events';
import { mkdir } from 'node:fs/promises';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { artifacts, startBrowser, startStack, traced } from './harness.mjs';

/** The bound the stack is given (AGENTFY_JWT_JWKS_MAX_STALE), the least the API takes. */
const maxStaleMs = 10_000;
/** The window's cadence: 5 s ± 0.5 s. */
const intervalMs = 5_500;
/** The deadline of a wait for something the window does within a poll or two. */
const eventTimeoutMs = 30_000;

const ptest = (name, fn) => test(name, traced(() => browser.context, name, fn));

/** provider is a JWK set server: one ES256 key, served at /jwks.json until stopped. */
function jwksProvider() {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const kid = 'web-outage-1';
  const jwks = JSON.stringify({ keys: [{ ...publicKey.export({ format: 'jwk' }), kid, alg: 'ES256', use: 'sig' }] });
  let fetches = 0;
  const server = createServer((req, res) => {
    if (req.url !== '/jwks.json') {
      res.writeHead(404).end();
      return;
    }
    fetches++;
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(jwks);
  });
  const b64 = (v) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');
  return {
    fetches: () => fetches,
    async start(port = 0) {
      server.listen(port, '127.0.0.1');
      await once(server, 'listening');
      return server.address().port;
    },
    async stop() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
    /** token mints a JWT of this provider for sub. */
    token(issuer, sub) {
      const now = Math.floor(Date.now() / 1000);
      const input = `${b64({ alg: 'ES256', typ: 'JWT', kid })}.${b64({ iss: issuer, aud: 'agentfy-api', sub, iat: now, exp: now + 3600 })}`;
      const sig = sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' });
      return `${input}.${sig.toString('base64url')}`;
    },
  };
}

let provider;
let port;
let stack;
let browser;
const issuer = 'https://idp.outage.test';

before(async () => {
  provider = jwksProvider();
  port = await provider.start();
  [stack, browser] = await Promise.all([
    startStack({
      restartAfter: '3s',
      env: {
        AGENTFY_JWT_JWKS_URL: `http://127.0.0.1:${port}/jwks.json`,
        AGENTFY_JWT_ISSUER: issuer,
        AGENTFY_JWT_AUDIENCE: 'agentfy-api',
        AGENTFY_JWT_JWKS_MAX_STALE: `${maxStaleMs / 1000}s`,
      },
    }),
    startBrowser(),
  ]);
  await mkdir(artifacts, { recursive: true });
  await browser.context.tracing.start({ screenshots: true, snapshots: true });
});
after(async () => {
  await browser?.close();
  await stack?.close();
  await provider?.stop().catch(() => {});
});

ptest('an outage of the sign-in service keeps the window signed in, with its last frame, and frames come back with it', async () => {
  const r = stack.ready;
  const token = provider.token(issuer, 'u-alice');
  const page = await browser.context.newPage();
  await page.bringToFront();
  const answers = [];
  page.on('response', (res) => {
    if (res.url().includes('/worker/view')) {
      answers.push(res.status());
    }
  });
  await page.goto(`${r.app}#/agents/${r.agent}/worker?token=${encodeURIComponent(token)}`);
  const section = page.getByRole('region', { name: 'Браузер агента', exact: true });
  const notice = section.getByRole('status');
  const image = page.locator('.bw-open:not([hidden]) .bw-image[src]');
  await image.waitFor({ timeout: eventTimeoutMs });
  assert.ok(provider.fetches() > 0, 'the stack fetched the provider\'s keys');

  await provider.stop();
  const stoppedAt = Date.now();
  await notice.filter({ hasText: 'Сервис входа не отвечает' }).waitFor({ timeout: maxStaleMs + 2 * intervalMs + eventTimeoutMs });
  const noticedAfter = Date.now() - stoppedAt;
  // The keys were fetched at most half the bound before the stop (the stack refreshes
  // a 10-s bound every 5 s), and verify until they are older than the bound.
  assert.ok(noticedAfter >= maxStaleMs / 2 - 1_000, `the notice ${noticedAfter} ms after the stop: the last keys should still verify then`);
  assert.match(await notice.textContent(), /Сервис входа не отвечает: показан последний снимок\. (Повторим через \d+ с\.|Повторяем…)/);
  // Still signed in: the same screen, the last frame, the token kept; never the sign-in form.
  assert.equal(await image.isVisible(), true, 'the last frame stays');
  assert.equal(await page.getByRole('heading', { name: 'Вход' }).count(), 0, 'not signed out');
  assert.equal(await page.evaluate(() => sessionStorage.getItem('agentfy.token')), token);
  assert.ok(answers.includes(503) && !answers.includes(401), `view answers ${answers}`);
  await page.screenshot({ path: join(artifacts, 'browser-window-identity-outage.png') });

  // And a poll later, still so: it retries at the normal interval without signing out.
  await page.waitForResponse((res) => res.url().includes('/worker/view'), { timeout: intervalMs + eventTimeoutMs });
  assert.equal(await page.getByRole('heading', { name: 'Вход' }).count(), 0, 'not signed out after another poll');

  // The provider back on the same address: frames again, nothing done.
  const before = await image.getAttribute('src');
  await provider.start(port);
  await page.waitForFunction(
    (src) => {
      const img = document.querySelector('.bw-open:not([hidden]) .bw-image[src]');
      return img !== null && img.getAttribute('src') !== src && document.querySelector('.bw-notice')?.textContent === '';
    },
    before,
    { timeout: 2 * intervalMs + eventTimeoutMs },
  );
  assert.equal(await page.getByRole('heading', { name: 'Вход' }).count(), 0);
  assert.ok(!answers.includes(401), `view answers ${answers}`);
  await page.close();
});
