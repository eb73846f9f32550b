// The web app in Chromium against the real local stack: sign-in, the «Браузер агента»
// window's polling rules, decode-before-swap, failures that keep the frame, a stopped
// and a new session, the states at 1280×720 and 360×740, the home page, and no token in
// any URL. Screenshots go to $AGENTFY_WEB_ARTIFACTS (.artifacts/web); failures keep traces.

import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { setTimeout as observe } from 'node:timers/promises';
import { artifacts, startBrowser, startStack, traced } from './harness.mjs';


/** The app's cadence (the SDK's watchWorkerView): 5 s ± 0.5 s of jitter; the API's pace per caller. */
const intervalMs = 5_000;
const jitterMs = 500;
const paceMs = 3_000;
const toleranceMs = 1_000;

const isView = (req) => req.url().includes('/worker/view');

/** ptest is a test whose failure keeps a trace and screenshots (harness.mjs traced). */
const ptest = (name, fn) => test(name, traced(() => browser.context, name, fn));

let stack;
let r;
let browser;
/** Every request any page made: checked for tokens at the end. */
const requests = [];

before(async () => {
  [stack, browser] = await Promise.all([startStack({ restartAfter: '3s' }), startBrowser()]);
  r = stack.ready;
  browser.context.on('request', (req) => requests.push({ url: req.url(), headers: req.headers() }));
  await mkdir(artifacts, { recursive: true });
  await browser.context.tracing.start({ screenshots: true, snapshots: true });
});
after(async () => {
  await browser?.close();
  await stack?.close();
});

/**
 * openApp opens a tab in front at route with the token handed over in the fragment, as
 * the dev banner does, and records the tab's view requests with their start and end times.
 */
async function openApp(route, token = r.tokens.member) {
  const page = await browser.context.newPage();
  await page.bringToFront();
  const views = [];
  let inFlight = 0;
  let maxInFlight = 0;
  page.on('request', (req) => {
    if (isView(req)) {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      views.push({ at: Date.now(), req });
    }
  });
  const settle = (req) => {
    if (isView(req)) {
      inFlight--;
    }
  };
  page.on('requestfinished', settle);
  page.on('requestfailed', settle);
  // `#token=…` alone (as the dev banner prints it), or after the route.
  const sep = route === '' ? '' : route.includes('?') ? '&' : '?';
  await page.goto(`${r.app}#${route}${token ? `${sep}token=${encodeURIComponent(token)}` : ''}`);
  return { page, views, maxInFlight: () => maxInFlight };
}

/** The parts of the «Браузер агента» window, found as a person (or screen reader) would. */
function windowOf(page) {
  const section = page.getByRole('region', { name: 'Браузер агента', exact: true });
  return {
    section,
    toggle: page.getByRole('button', { name: 'Браузер агента', exact: true }),
    image: section.locator('.bw-image'),
    placeholder: section.locator('.bw-placeholder'),
    notice: section.getByRole('status'),
    caption: section.locator('figcaption'),
  };
}

const visibleImage = (page) => page.locator('.bw-open:not([hidden]) .bw-image[src]').waitFor({ timeout: 20_000 });

describe('sign-in', () => {
  let page;
  afterEach(async () => page?.close());

  ptest('takes the token from the fragment and removes it from the address bar', async () => {
    ({ page } = await openApp(''));
    await page.getByRole('heading', { name: 'Агенты' }).waitFor();
    assert.equal(new URL(page.url()).hash, '');
    assert.equal(await page.evaluate(() => sessionStorage.getItem('agentfy.token')), r.tokens.member);
    await page.getByLabel('Идентификатор агента').fill(r.agent);
    await page.getByLabel('Идентификатор агента').press('Enter');
    await windowOf(page).toggle.waitFor();
    assert.equal(new URL(page.url()).hash, `#/agents/${r.agent}/worker`);
  });

  ptest('takes a pasted token and returns to the screen asked for', async () => {
    ({ page } = await openApp(`/agents/${r.agent}/chat`, null));
    await page.getByRole('heading', { name: 'Вход' }).waitFor();
    await page.getByLabel('Токен доступа').fill(r.tokens.member);
    await page.getByRole('button', { name: 'Войти' }).click();
    await windowOf(page).toggle.waitFor();
    await page.getByRole('heading', { name: 'Переписка' }).waitFor();
  });

  ptest('a refused token leads back to sign-in', async () => {
    ({ page } = await openApp(`/agents/${r.agent}/worker`, 'not-a-token'));
    await page.getByRole('heading', { name: 'Вход' }).waitFor();
    await page.getByRole('alert').filter({ hasText: 'Токен не подошёл' }).waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('agentfy.token')), null);
  });
});

describe('the window on the worker screen of a browsing agent', () => {
  // One tab walks through the scenario in order, as a person watching would.
  let app;
  let page;
  let w;
  before(async () => {
    app = await openApp(`/agents/${r.agent}/worker`);
    page = app.page;
    w = windowOf(page);
  });
  after(async () => page?.close());

  ptest('is expanded and shows the frame with its title, URL and age', async () => {
    assert.equal(await w.toggle.getAttribute('aria-expanded'), 'true');
    const controls = await w.toggle.getAttribute('aria-controls');
    assert.equal(await page.locator(`#${controls}`).isVisible(), true);
    await visibleImage(page);
    assert.match(await w.image.getAttribute('src'), /^blob:/);
    assert.match(await w.image.getAttribute('alt'), /^Снимок вкладки «.+»$/);
    assert.match(await w.caption.locator('.bw-page-url').textContent(), new RegExp(`^${r.site}/`));
    assert.notEqual((await w.caption.locator('.bw-page-title').textContent()).trim(), '');
    const age = w.caption.locator('time');
    assert.match(await age.getAttribute('datetime'), /Z$/);
    await page.waitForFunction(() => /\d+ с назад/.test(document.querySelector('.bw-age')?.textContent ?? ''), null, { timeout: 5_000 });
    await page.locator('.browser-window').screenshot({ path: join(artifacts, 'browser-window-desktop.png') });
    await page.screenshot({ path: join(artifacts, 'worker-screen-desktop.png'), fullPage: true });
  });

  ptest('at 1280×720 the frame with its title, URL and age is in view without scrolling; a click or Enter opens it at full size, Esc closes it', async () => {
    await page.setViewportSize({ width: 1280, height: 720 });
    await visibleImage(page);
    await page.evaluate(() => window.scrollTo(0, 0));
    for (const part of [w.image, w.caption.locator('.bw-page-title'), w.caption.locator('.bw-page-url'), w.caption.locator('.bw-age')]) {
      const box = await part.boundingBox();
      assert.ok(box && box.y >= 0 && box.y + box.height <= 720 && box.width > 0, `${await part.evaluate((e) => e.className)} at ${JSON.stringify(box)}`);
    }
    await page.screenshot({ path: join(artifacts, 'worker-1280x720.png') });

    const dialog = page.getByRole('dialog');
    await w.section.getByRole('button', { name: /^Открыть снимок вкладки/ }).click();
    await dialog.waitFor();
    // Full size: one image pixel per CSS pixel.
    const full = await dialog.locator('img').evaluate((img) => ({ natural: img.naturalWidth, shown: img.getBoundingClientRect().width }));
    assert.ok(full.natural > 0 && Math.abs(full.natural - full.shown) < 1, JSON.stringify(full));
    await page.screenshot({ path: join(artifacts, 'worker-1280x720-full-size.png') });
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });

    await w.section.getByRole('button', { name: /^Открыть снимок вкладки/ }).focus();
    await page.keyboard.press('Enter');
    await dialog.waitFor();
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  ptest('asks every 5 ± 0.5 s while expanded, and swaps a frame in only once it decoded', async () => {
    // Watch the <img>: every change of src must land on an image that is already
    // decoded (complete, with pixels), and src must never be emptied between frames.
    await page.evaluate(() => {
      const img = document.querySelector('.bw-image');
      window.__frames = [];
      new MutationObserver(() => {
        window.__frames.push({ src: img.getAttribute('src'), hidden: img.hidden, complete: img.complete, width: img.naturalWidth });
      }).observe(img, { attributes: true, attributeFilter: ['src', 'hidden'] });
    });
    const start = Date.now();
    await observe(20_000);
    const seen = app.views.filter((v) => v.at >= start).map((v) => v.at);
    assert.ok(seen.length >= 3 && seen.length <= 6, `${seen.length} view requests in 20 s`);
    const gaps = [];
    for (let i = 1; i < seen.length; i++) {
      const gap = seen[i] - seen[i - 1];
      gaps.push(gap);
      assert.ok(gap >= intervalMs - jitterMs - 100 && gap <= intervalMs + jitterMs + 500, `interval ${gap} ms`);
    }
    // The waits are drawn, not fixed: two of them differ.
    assert.ok(Math.max(...gaps) - Math.min(...gaps) > 20, `intervals ${gaps} are all the same`);
    assert.equal(app.maxInFlight(), 1, 'never two view requests at once');

    const frames = await page.evaluate(() => window.__frames);
    const srcs = new Set(frames.map((f) => f.src));
    assert.ok(srcs.size >= 2, `${srcs.size} different frames`);
    for (const f of frames) {
      assert.match(f.src ?? '', /^blob:/, 'src never becomes empty');
      assert.equal(f.hidden, false);
      assert.ok(f.complete && f.width > 0, 'a frame is shown only once decoded');
    }
    // A replaced frame's blob: URL was revoked.
    const revoked = await page.evaluate((url) => fetch(url).then(() => false, () => true), frames[0].src);
    assert.equal(revoked, true);
  });

  ptest('asks nothing while collapsed, and at once when expanded again (keyboard)', async () => {
    await w.toggle.focus();
    await page.keyboard.press('Enter');
    assert.equal(await w.toggle.getAttribute('aria-expanded'), 'false');
    assert.equal(await page.locator(`#${await w.toggle.getAttribute('aria-controls')}`).isHidden(), true);
    const collapsedAt = Date.now();
    await observe(intervalMs + 2_000);
    assert.deepEqual(app.views.filter((v) => v.at > collapsedAt + 100).map((v) => v.at), [], 'no request while collapsed');

    const expandedAt = Date.now();
    const next = page.waitForRequest(isView);
    await page.keyboard.press('Space');
    await next;
    assert.equal(await w.toggle.getAttribute('aria-expanded'), 'true');
    assert.ok(Date.now() - expandedAt < toleranceMs, `asked ${Date.now() - expandedAt} ms after expanding`);
  });

  ptest('asks nothing while the tab is hidden, and at once when it is shown again', async () => {
    const other = await browser.context.newPage();
    await other.bringToFront();
    await page.waitForFunction(() => document.visibilityState === 'hidden');
    const hiddenAt = Date.now();
    await observe(intervalMs + 2_000);
    assert.equal(await page.evaluate(() => document.visibilityState), 'hidden');
    assert.deepEqual(app.views.filter((v) => v.at > hiddenAt + 100).map((v) => v.at), [], 'no request while hidden');

    const shownAt = Date.now();
    const next = page.waitForRequest(isView);
    await page.bringToFront();
    await next;
    assert.equal(await page.evaluate(() => document.visibilityState), 'visible');
    assert.ok(Date.now() - shownAt < toleranceMs + 500, `asked ${Date.now() - shownAt} ms after showing`);
    await other.close();
    await visibleImage(page);
  });

  ptest('expanding right after a frame waits only for the 3 s pace', async () => {
    await visibleImage(page);
    // Time from a request that brought a frame: one answered 429 or 503 (the gate or a
    // busy machine) brings none, and the window then waits its normal 5 s.
    let askedAt;
    let shown;
    for (;;) {
      shown = await w.image.getAttribute('src');
      const request = await page.waitForRequest(isView);
      askedAt = Date.now();
      const response = await request.response();
      if (response?.status() === 200 && (await response.json()).page) break;
    }
    await page.waitForFunction((src) => document.querySelector('.bw-image')?.getAttribute('src') !== src, shown);
    const next = page.waitForRequest(isView);
    await w.toggle.click();
    await w.toggle.click();
    await next;
    const gap = Date.now() - askedAt;
    assert.ok(gap >= paceMs - 200 && gap < paceMs + 1_000, `asked again ${gap} ms after the previous request`);
  });

  ptest('shows the page title and URL as text, never as markup', async () => {
    const title = '<img src=x onerror="window.__injected=1">Заголовок';
    const url = 'https://example.com/?q=<b>bold</b>';
    await page.route(
      '**/worker/view',
      async (route) => {
        const response = await route.fetch();
        const body = await response.json();
        if (body.live && body.page) {
          Object.assign(body.page, { title, url });
        }
        await route.fulfill({ response, json: body });
      },
      { times: 1 },
    );
    await page.waitForFunction((t) => document.querySelector('.bw-page-title')?.textContent === t, title, { timeout: intervalMs * 2 });
    assert.equal(await w.caption.locator('.bw-page-url').textContent(), url);
    assert.equal(await w.caption.locator('img').count(), 0);
    assert.equal(await page.evaluate(() => window.__injected), undefined);
  });

  ptest('a frame with masked regions says «Часть страницы скрыта» over its corner, an unmasked one does not, and nothing moves', async () => {
    await visibleImage(page);
    const masked = w.section.getByText('Часть страницы скрыта', { exact: true });
    // One live frame, replayed with and without a masked count, so that only the count
    // changes between the two answers.
    let live;
    let count = 2;
    const replay = async (route) => {
      if (live === undefined) {
        const response = await route.fetch();
        const body = response.status() === 200 ? await response.json() : undefined;
        if (!body?.page) {
          await route.fulfill({ response }); // a 429/503 or no tab: as it came, try the next
          return;
        }
        live = body;
      }
      await route.fulfill({ status: 200, headers: { 'Cache-Control': 'no-store' }, json: { live: true, page: { ...live.page, masked: count } } });
    };
    await page.route('**/worker/view', replay);
    try {
      await page.setViewportSize({ width: 1280, height: 720 });
      await page.evaluate(() => window.scrollTo(0, 0));
      await masked.waitFor({ timeout: 3 * (intervalMs + jitterMs) });
      const box = await w.image.boundingBox();
      for (const [width, height] of [[1280, 720], [360, 740]]) {
        await page.setViewportSize({ width, height });
        await page.evaluate(() => window.scrollTo(0, 0));
        const at = await masked.boundingBox();
        const screen = await w.section.locator('.bw-screen').boundingBox();
        assert.ok(at && at.y >= screen.y && at.x >= screen.x && at.x + at.width <= screen.x + screen.width, `the notice at ${JSON.stringify(at)} lies over the screen at ${JSON.stringify(screen)}`);
        assert.ok(at.y + at.height <= height, `at ${width}×${height} the notice is at ${JSON.stringify(at)}, out of view`);
        assert.ok(await page.evaluate((w) => document.documentElement.scrollWidth <= w, width), `no horizontal scrolling at ${width} px`);
        await page.locator('.browser-window').screenshot({ path: join(artifacts, `browser-window-masked-${width}x${height}.png`) });
      }
      // At 360 px the picture fills the screen's width, so the notice lies over it: a
      // click there still opens the frame at full size.
      const at = await masked.boundingBox();
      await page.mouse.click(at.x + at.width / 2, at.y + at.height / 2);
      await page.getByRole('dialog').waitFor();
      await page.keyboard.press('Escape');
      await page.getByRole('dialog').waitFor({ state: 'hidden' });
      await page.setViewportSize({ width: 1280, height: 720 });
      count = undefined; // JSON leaves it out, as the API does
      await masked.waitFor({ state: 'hidden', timeout: intervalMs + jitterMs + toleranceMs });
      assert.deepEqual(await w.image.boundingBox(), box, 'the notice\'s going moves nothing');
      assert.equal(await w.image.isVisible(), true);
    } finally {
      await page.unroute('**/worker/view', replay);
      await page.setViewportSize({ width: 1280, height: 900 });
    }
  });

  for (const failure of [
    { name: '503', backOffMs: 0, answer: (route) => route.fulfill({ status: 503, headers: { 'Cache-Control': 'no-store' }, json: { error: { code: 'unavailable', message: 'view unavailable' } } }) },
    { name: '429', backOffMs: 2_000, answer: (route) => route.fulfill({ status: 429, headers: { 'Cache-Control': 'no-store', 'Retry-After': '2' }, json: { error: { code: 'rate_limited', message: 'too many view requests' } } }) },
    { name: 'network failure', backOffMs: 0, answer: (route) => route.abort('failed') },
  ]) {
    const after = failure.backOffMs ? ' plus its Retry-After' : '';
    ptest(`a ${failure.name} keeps the last frame, says so, and retries at the normal interval${after}`, async () => {
      await visibleImage(page);
      await page.route('**/worker/view', failure.answer, { times: 1 });
      const failed = await page.waitForRequest(isView, { timeout: intervalMs + jitterMs + toleranceMs });
      // The window asks only after the previous frame was swapped in: this is the last frame.
      const before = await w.image.getAttribute('src');
      const boxBefore = await w.image.boundingBox();
      await w.notice.filter({ hasText: 'временно недоступен' }).waitFor();
      const failedAt = Date.now();
      assert.equal(await w.image.getAttribute('src'), before, 'the same frame stays');
      assert.deepEqual(await w.image.boundingBox(), boxBefore, 'the warning moves nothing');
      // A live countdown to the next try.
      const seconds = Number(/Повторим через (\d+) с\./.exec(await w.notice.textContent())?.[1]);
      assert.ok(seconds >= 1 && seconds <= 8, await w.notice.textContent());
      if (seconds > 1) {
        await page.waitForFunction(
          (n) => { const m = /Повторим через (\d+) с\./.exec(document.querySelector('.bw-notice')?.textContent ?? ''); return m !== null && Number(m[1]) < n; },
          seconds,
          { timeout: 2_500 },
        );
      }
      assert.equal(await w.image.isVisible(), true);
      assert.equal(await w.placeholder.isVisible(), false, 'never «Браузер закрыт»');
      const wait = intervalMs + failure.backOffMs;
      const retry = await page.waitForRequest((req) => isView(req) && req !== failed, { timeout: wait + jitterMs + toleranceMs });
      const gap = Date.now() - failedAt;
      assert.ok(gap > wait - jitterMs - 500, `retried after ${gap} ms`);
      await retry.response();
      await page.waitForFunction(() => document.querySelector('.bw-notice')?.textContent === '');
    });
  }

  ptest('a stopped session shows «Браузер закрыт» with no image; a new one brings frames back without a reload', async () => {
    await visibleImage(page);
    await page.evaluate(() => {
      window.__sameDocument = true;
    });
    await stack.stopSession();
    await w.placeholder.filter({ hasText: 'Браузер закрыт' }).waitFor({ timeout: 10_000 });
    assert.equal(await w.image.isVisible(), false);
    assert.equal(await w.image.getAttribute('src'), null);
    await page.screenshot({ path: join(artifacts, 'worker-screen-closed.png'), fullPage: true });

    // Record what the window says from now on: a new session must read «Ждём снимок
    // экрана…» until its first frame, never «Нет открытых вкладок».
    await page.evaluate(() => {
      const text = document.querySelector('.bw-placeholder strong');
      window.__said = [text.textContent];
      new MutationObserver(() => window.__said.push(text.textContent)).observe(text, { childList: true, characterData: true, subtree: true });
    });
    const restartFrom = Date.now();
    // agentfy dev starts a new session 3 s later; the status feed reports it.
    await w.placeholder.filter({ hasText: 'Ждём снимок экрана…' }).waitFor({ timeout: 15_000 });
    await page.screenshot({ path: join(artifacts, 'worker-screen-waiting.png'), fullPage: true });
    await visibleImage(page);
    const said = await page.evaluate(() => window.__said);
    assert.ok(!said.includes('Нет открытых вкладок'), `the window said ${JSON.stringify(said)}`);
    // While waiting it asks at the 3-s pace, not every 5 s.
    const asked = app.views.filter((v) => v.at >= restartFrom).map((v) => v.at);
    for (let i = 1; i < asked.length; i++) {
      assert.ok(asked[i] - asked[i - 1] < intervalMs - jitterMs, `waiting, asked ${asked[i] - asked[i - 1]} ms after the previous request`);
    }
    assert.match(await w.image.getAttribute('src'), /^blob:/);
    assert.equal(await w.placeholder.isVisible(), false);
    assert.equal(await page.evaluate(() => window.__sameDocument), true, 'no reload');
  });
});

describe('other agents and screens', () => {
  let page;
  afterEach(async () => page?.close());

  ptest('a live session without a tab says no tab is open', async () => {
    ({ page } = await openApp(`/agents/${r.emptyAgent}/worker`));
    const w = windowOf(page);
    await w.placeholder.filter({ hasText: 'Нет открытых вкладок' }).waitFor();
    assert.equal(await w.image.isVisible(), false);
  });

  ptest('an agent without a session is closed, and its window asks nothing', async () => {
    const app = await openApp(`/agents/${r.idleAgent}/worker`);
    page = app.page;
    const w = windowOf(page);
    await page.getByText('Сессия агента: остановлена').waitFor();
    await w.placeholder.filter({ hasText: 'Браузер закрыт' }).waitFor();
    assert.deepEqual(app.views, []);
  });

  ptest('an agent of another team is not found, with no word of polling', async () => {
    ({ page } = await openApp(`/agents/${r.foreignAgent}/worker`));
    await windowOf(page).placeholder.filter({ hasText: 'Агент не найден' }).waitFor();
    const text = await page.locator('main').innerText();
    assert.ok(!/секунд|обновля/.test(text), text);
  });

  for (const [width, height] of [[1280, 720], [360, 740]]) {
    ptest(`the states of the window at ${width}×${height}`, async () => {
      const states = [
        [`/agents/${r.agent}/worker`, () => visibleImage(page), 'frame'],
        [`/agents/${r.emptyAgent}/worker`, () => page.getByText('Нет открытых вкладок').waitFor(), 'no-tab'],
        [`/agents/${r.idleAgent}/worker`, () => page.getByText('Браузер закрыт').waitFor(), 'closed'],
        [`/agents/${r.foreignAgent}/worker`, () => page.getByText('Агент не найден').waitFor(), 'not-found'],
        ['/', () => page.locator('.agents').waitFor(), 'home'],
      ];
      for (const [route, ready, name] of states) {
        await page?.close();
        ({ page } = await openApp(route));
        await page.setViewportSize({ width, height });
        await ready();
        assert.ok(await page.evaluate((w) => document.documentElement.scrollWidth <= w, width), `${name}: no horizontal scrolling`);
        if (name === 'frame') {
          // The frame and its caption fit the screen's height at every width.
          for (const part of ['.bw-image', '.bw-page-title', '.bw-age']) {
            const box = await page.locator(part).boundingBox();
            assert.ok(box && box.y + box.height <= height, `${part} at ${JSON.stringify(box)}`);
          }
        }
        await page.screenshot({ path: join(artifacts, `${name}-${width}x${height}.png`) });
      }
    });
  }

  ptest('the home page lists the member\'s agents with their session status, linking to the worker screen', async () => {
    ({ page } = await openApp(''));
    const list = page.locator('.agents');
    await list.waitFor();
    const items = await list.locator('li').evaluateAll((lis) =>
      lis.map((li) => ({ id: li.querySelector('.agent-id').textContent, status: li.querySelector('.agent-status').textContent, href: li.querySelector('a').getAttribute('href') })),
    );
    const byId = Object.fromEntries(items.map((i) => [i.id, i]));
    assert.equal(byId[r.agent]?.status, 'работает', JSON.stringify(items));
    assert.equal(byId[r.idleAgent]?.status, 'сессии нет', JSON.stringify(items));
    assert.equal(byId[r.foreignAgent], undefined, 'an agent of another team is not listed');
    await page.getByRole('link', { name: new RegExp(r.agent) }).first().click();
    await page.waitForURL(new RegExp(`#/agents/${r.agent}/worker$`));
    await visibleImage(page);

    // A member of the other team sees that team's agents only.
    await page.close();
    ({ page } = await openApp('', r.tokens.outsider));
    await page.locator('.agents').waitFor();
    const theirs = await page.locator('.agents .agent-id').allTextContents();
    assert.ok(theirs.includes(r.foreignAgent) && !theirs.includes(r.agent), JSON.stringify(theirs));
  });

  ptest('the chat screen has the same window, and both fit 360 px', async () => {
    ({ page } = await openApp(`/agents/${r.agent}/chat`));
    const w = windowOf(page);
    await page.getByRole('heading', { name: 'Браузер агента', exact: true }).waitFor();
    assert.equal(await page.getByRole('link', { name: 'Чат' }).getAttribute('aria-current'), 'page');
    await visibleImage(page);
    await page.screenshot({ path: join(artifacts, 'chat-screen-desktop.png'), fullPage: true });

    await page.setViewportSize({ width: 360, height: 800 });
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 360), 'no horizontal scrolling at 360 px');
    await page.screenshot({ path: join(artifacts, 'chat-screen-360.png'), fullPage: true });
    await page.getByRole('link', { name: 'Рабочий экран' }).click();
    await w.toggle.waitFor();
    await visibleImage(page);
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= 360), 'no horizontal scrolling at 360 px');
    await page.locator('.browser-window').screenshot({ path: join(artifacts, 'browser-window-360.png') });
    await page.screenshot({ path: join(artifacts, 'worker-screen-360.png'), fullPage: true });
  });
});

test('no request URL or Referer carries a token', () => {
  // The fragment never leaves the browser (Playwright reports it as part of a
  // navigation's URL): what reaches a server is the URL without it.
  const secrets = [r.tokens.member, r.tokens.outsider, 'not-a-token'];
  assert.ok(requests.length > 20, `${requests.length} requests seen`);
  for (const { url: full, headers } of requests) {
    const url = full.split('#')[0];
    for (const secret of secrets) {
      assert.ok(!url.includes(secret) && !url.includes(encodeURIComponent(secret)), `token in ${url.slice(0, 120)}`);
      assert.ok(!(headers.referer ?? '').includes(secret), `token in the Referer of ${url.slice(0, 120)}`);
    }
  }
  const withAuth = requests.filter(({ headers }) => headers.authorization);
  assert.ok(withAuth.length > 0 && withAuth.every(({ url }) => new URL(url).pathname.startsWith('/v1/')), 'the token travels only in the Authorization header of API calls');
});
