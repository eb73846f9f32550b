// The web app in Chromium against the real local stack: sign-in, the «Браузер агента»
// window's polling rules, decode-before-swap, failures that keep the frame, a stopped
// and a new session, an answer of the old session that comes after the new one began,
// the states at 1280×720 and 360×740, the home page, and no token in any URL. Screenshots go to $AGENTFY_WEB_ARTIFACTS (.artifacts/web); failures keep traces.
//
// Timing: every wait is for the event that matters (a request sent, an answer, the image
// replaced), with a generous deadline, never for a period — except where a test proves
// that nothing happens. Intervals are measured in the page's own clock (recordViews), so
// a loaded machine that reports events late to the test cannot skew them.

import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { setTimeout as pause } from 'node:timers/promises';
import { artifacts, marks, nextViews, recordViews, startBrowser, startStack, traced, viewsSent } from './harness.mjs';

/** The app's cadence (the SDK's watchWorkerView): 5 s ± 0.5 s of jitter; the API's pace per caller. */
const intervalMs = 5_000;
const jitterMs = 500;
const paceMs = 3_000;
/** How late a timer or a reaction of the app may be on a loaded machine, in the page's clock. */
const toleranceMs = 1_000;
/**
 * sendSlackMs: the page notes a request when the app calls fetch, a moment after the SDK
 * took the time it paces from; that moment may differ between two requests.
 */
const sendSlackMs = 100;
/** The window asks the view route itself when the status feed said nothing this long. */
const feedSilenceMs = 3_000;
/** The deadline of a wait for something the window does within a poll or two. */
const eventTimeoutMs = 30_000;

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
  await recordViews(browser.context);
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

const visibleImage = (page) => page.locator('.bw-open:not([hidden]) .bw-image[src]').waitFor({ timeout: eventTimeoutMs });

/** frameSwapped waits until the window shows a frame other than the one whose src was src. */
const frameSwapped = (page, src) =>
  page.waitForFunction((src) => { const img = document.querySelector('.bw-open:not([hidden]) .bw-image[src]'); return img !== null && img.getAttribute('src') !== src; }, src, { timeout: eventTimeoutMs });

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
    await page.waitForFunction(() => /\d+ с назад/.test(document.querySelector('.bw-age')?.textContent ?? ''), null, { timeout: eventTimeoutMs });
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
    // Four requests in a row, three waits drawn by the SDK, in the page's clock.
    const from = (await viewsSent(page)).length;
    const seen = (await nextViews(page, from + 3, 4 * (intervalMs + jitterMs) + eventTimeoutMs)).slice(from, from + 4);
    const gaps = [];
    for (let i = 1; i < seen.length; i++) {
      const gap = seen[i].at - seen[i - 1].at;
      if (seen[i - 1].status === 429) {
        continue; // its Retry-After comes on top (tested below)
      }
      gaps.push(gap);
      assert.ok(gap >= intervalMs - jitterMs - sendSlackMs && gap <= intervalMs + jitterMs + toleranceMs, `interval ${gap} ms`);
    }
    // The waits are drawn, not fixed: two of them differ.
    assert.ok(gaps.length >= 2 && Math.max(...gaps) - Math.min(...gaps) > 20, `intervals ${gaps} are all the same`);
    assert.equal(app.maxInFlight(), 1, 'never two view requests at once');

    await page.waitForFunction(() => new Set(window.__frames.map((f) => f.src)).size >= 2, null, { timeout: eventTimeoutMs });
    const frames = await page.evaluate(() => window.__frames);
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
    const collapsedAt = (await marks(page)).toggle;
    await pause(intervalMs + 2_000);
    const before = await viewsSent(page);
    assert.deepEqual(before.filter((v) => v.at > collapsedAt).map((v) => v.at), [], 'no request while collapsed');

    await page.keyboard.press('Space');
    const next = (await nextViews(page, before.length)).at(before.length);
    assert.equal(await w.toggle.getAttribute('aria-expanded'), 'true');
    const expandedAt = (await marks(page)).toggle;
    assert.ok(next.at - expandedAt < toleranceMs, `asked ${next.at - expandedAt} ms after expanding`);
  });

  ptest('asks nothing while the tab is hidden, and at once when it is shown again', async () => {
    const other = await browser.context.newPage();
    await other.bringToFront();
    await page.waitForFunction(() => document.visibilityState === 'hidden');
    const hiddenAt = (await marks(page)).hidden;
    await pause(intervalMs + 2_000);
    assert.equal(await page.evaluate(() => document.visibilityState), 'hidden');
    const before = await viewsSent(page);
    assert.deepEqual(before.filter((v) => v.at > hiddenAt).map((v) => v.at), [], 'no request while hidden');

    await page.bringToFront();
    const next = (await nextViews(page, before.length)).at(before.length);
    assert.equal(await page.evaluate(() => document.visibilityState), 'visible');
    const shownAt = (await marks(page)).visible;
    assert.ok(next.at - shownAt < toleranceMs, `asked ${next.at - shownAt} ms after showing`);
    await other.close();
    await visibleImage(page);
  });

  ptest('expanding right after a frame waits only for the 3 s pace', async () => {
    await visibleImage(page);
    // Right after a frame is swapped in, collapse and expand: the request before the
    // collapse was at most a moment ago, so the next must wait for the pace from it.
    for (let attempt = 1; ; attempt++) {
      const shown = await w.image.getAttribute('src');
      await frameSwapped(page, shown);
      await w.toggle.click();
      const collapsedAt = (await marks(page)).toggle;
      await w.toggle.click();
      const expandedAt = (await marks(page)).toggle;
      const sent = await viewsSent(page);
      const previous = sent.filter((v) => v.at <= collapsedAt).at(-1);
      const next = (await nextViews(page, sent.length - (sent.at(-1).at > collapsedAt ? 1 : 0)))
        .find((v) => v.at >= expandedAt);
      if (expandedAt - previous.at >= paceMs - 200 && attempt < 3) {
        continue; // the machine was too slow for the pace to matter this time
      }
      const due = Math.max(previous.at + paceMs, expandedAt);
      assert.ok(next.at >= previous.at + paceMs - sendSlackMs, `asked again ${next.at - previous.at} ms after the previous request`);
      assert.ok(next.at - due < toleranceMs, `asked ${next.at - due} ms after the pace allowed it`);
      return;
    }
  });

  ptest('shows the page title and URL as text, never as markup', async () => {
    const title = '<img src=x onerror="window.__injected=1">Заголовок';
    const url = 'https://example.com/?q=<b>bold</b>';
    // Every answer with a frame gets that title and URL until one is on screen (an
    // answer without a frame — a 429, a 503 — passes as it came).
    const inject = async (route) => {
      const response = await route.fetch();
      const body = await response.json();
      if (body.live && body.page) {
        Object.assign(body.page, { title, url });
      }
      await route.fulfill({ response, json: body });
    };
    await page.route('**/worker/view', inject);
    try {
      await page.waitForFunction((t) => document.querySelector('.bw-page-title')?.textContent === t, title, { timeout: eventTimeoutMs });
    } finally {
      await page.unroute('**/worker/view', inject);
    }
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
      await masked.waitFor({ timeout: eventTimeoutMs });
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
      // The next answers leave the count out, as the API does for a frame with nothing
      // masked: the notice goes with the first of them that is swapped in (an answer
      // already on its way may still carry the count).
      const before = await w.image.getAttribute('src');
      count = undefined;
      await masked.waitFor({ state: 'hidden', timeout: eventTimeoutMs });
      assert.notEqual(await w.image.getAttribute('src'), before, 'the notice went with a new frame');
      assert.deepEqual(await w.image.boundingBox(), box, 'the notice\'s going moves nothing');
      assert.equal(await w.image.isVisible(), true);
    } finally {
      await page.unroute('**/worker/view', replay);
      await page.setViewportSize({ width: 1280, height: 900 });
    }
  });

  ptest('a frame masked whole says why over its middle, for each reason and one it does not know, instead of «Часть страницы скрыта», and nothing moves', async () => {
    await visibleImage(page);
    const partly = w.section.getByText('Часть страницы скрыта', { exact: true });
    const note = w.section.locator('.bw-masked');
    // A frame as the broker sends one masked whole: its two dark greys in diagonal
    // stripes over all of it, the size of the replayed live frame (not of the frame on
    // screen when the test began: the agent may have moved to a page of another size
    // since, and a grey of another size moved the picture), with the live frame's page.
    const greyOf = (size) => page.evaluate(({ width, height }) => {
      const canvas = document.createElement('canvas');
      Object.assign(canvas, { width, height });
      const g = canvas.getContext('2d');
      g.fillStyle = '#3a3a3a';
      g.fillRect(0, 0, width, height);
      g.fillStyle = '#5c5c5c';
      for (let k = 12; k < width + height; k += 24) {
        // The band where k ≤ x + y < k + 12.
        g.beginPath();
        g.moveTo(k, 0);
        g.lineTo(k + 12, 0);
        g.lineTo(k + 12 - height, height);
        g.lineTo(k - height, height);
        g.fill();
      }
      return canvas.toDataURL('image/jpeg', 0.6).split(',')[1];
    }, size);
    let live;
    let grey;
    let shape = { masked: 3, hidden: 'motion' };
    const replay = async (route) => {
      if (live === undefined) {
        const response = await route.fetch();
        const body = response.status() === 200 ? await response.json() : undefined;
        if (!body?.page) {
          await route.fulfill({ response }); // a 429/503 or no tab: as it came, try the next
          return;
        }
        live = body;
        const size = await page.evaluate(async (data) => {
          const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
          const bitmap = await createImageBitmap(new Blob([bytes], { type: 'image/jpeg' }));
          return { width: bitmap.width, height: bitmap.height };
        }, body.page.data);
        grey = await greyOf(size);
      }
      const { masked: _, hidden: __, ...rest } = live.page;
      const frame = shape.hidden === undefined ? { ...rest, ...shape } : { ...rest, data: grey, ...shape };
      await route.fulfill({ status: 200, headers: { 'Cache-Control': 'no-store' }, json: { live: true, page: frame } });
    };
    const cases = [
      ['motion', 'Кадр скрыт целиком: страница двигалась так, что секреты нельзя было закрыть по отдельности'],
      ['changed', 'Кадр скрыт целиком: поле с секретом появилось или исчезло во время снимка'],
      ['view_transition', 'Кадр скрыт целиком: на странице шёл переход между видами'],
      ['ink', 'Кадр скрыт целиком: секрет отрисован так, что его нельзя закрыть отдельно'],
      ['a_reason_of_a_later_api', 'Кадр скрыт целиком, чтобы не показать секреты'],
      ['constructor', 'Кадр скрыт целиком, чтобы не показать секреты'],
    ];
    await page.route('**/worker/view', replay);
    try {
      for (const [reason, text] of cases) {
        shape = { masked: 3, hidden: reason };
        await w.section.getByText(text, { exact: true }).waitFor({ timeout: eventTimeoutMs });
        assert.equal(await partly.count(), 0, `${reason}: no «Часть страницы скрыта» over a frame hidden whole`);
        assert.equal(await note.count(), 1);
        for (const [width, height] of [[1280, 720], [360, 740]]) {
          await page.setViewportSize({ width, height });
          await page.evaluate(() => window.scrollTo(0, 0));
          const at = await note.boundingBox();
          const screen = await w.section.locator('.bw-screen').boundingBox();
          assert.ok(at && at.x >= screen.x && at.y >= screen.y && at.x + at.width <= screen.x + screen.width && at.y + at.height <= screen.y + screen.height, `${reason} at ${width}×${height}: the note at ${JSON.stringify(at)} lies over the screen at ${JSON.stringify(screen)}`);
          assert.ok(at.y + at.height <= height, `${reason} at ${width}×${height}: the note at ${JSON.stringify(at)} is out of view`);
          assert.ok(await note.evaluate((e) => e.scrollWidth <= e.clientWidth && e.scrollHeight <= e.clientHeight), `${reason} at ${width}×${height}: the note is cut short`);
          assert.ok(await page.evaluate((w) => document.documentElement.scrollWidth <= w, width), `no horizontal scrolling at ${width} px`);
          if (reason === 'motion' || width === 1280) {
            await page.locator('.browser-window').screenshot({ path: join(artifacts, `browser-window-hidden-${reason}-${width}x${height}.png`) });
          }
        }
        await page.setViewportSize({ width: 1280, height: 720 });
      }
      // A click on the note still opens the frame at full size.
      const at = await note.boundingBox();
      await page.mouse.click(at.x + at.width / 2, at.y + at.height / 2);
      await page.getByRole('dialog').waitFor();
      await page.keyboard.press('Escape');
      await page.getByRole('dialog').waitFor({ state: 'hidden' });
      // The next frames are masked in part, then not at all: the note says so, then goes;
      // the picture stays where it was.
      const box = await w.image.boundingBox();
      shape = { masked: 2 };
      await partly.waitFor({ timeout: eventTimeoutMs });
      assert.equal(await w.section.getByText(/^Кадр скрыт целиком/).count(), 0, 'the reason went with the frame hidden whole');
      shape = {};
      await note.waitFor({ state: 'hidden', timeout: eventTimeoutMs });
      assert.deepEqual(await w.image.boundingBox(), box, 'the notes\' coming and going moves nothing');
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
      let failed;
      const answered = new Promise((resolve) => {
        failed = async (route) => {
          await failure.answer(route);
          resolve();
        };
      });
      await page.route('**/worker/view', failed, { times: 1 });
      await answered;
      // The window asks only after the previous frame was swapped in: this is the last frame.
      const before = await w.image.getAttribute('src');
      const boxBefore = await w.image.boundingBox();
      const sent = await viewsSent(page);
      const failedAt = sent.at(-1).at;
      await w.notice.filter({ hasText: 'временно недоступен' }).waitFor({ timeout: eventTimeoutMs });
      assert.equal(await w.image.getAttribute('src'), before, 'the same frame stays');
      assert.deepEqual(await w.image.boundingBox(), boxBefore, 'the warning moves nothing');
      // A live countdown to the next try.
      const seconds = Number(/Повторим через (\d+) с\./.exec(await w.notice.textContent())?.[1]);
      assert.ok(seconds >= 1 && seconds <= 8, await w.notice.textContent());
      if (seconds > 1) {
        await page.waitForFunction(
          (n) => { const m = /Повторим через (\d+) с\./.exec(document.querySelector('.bw-notice')?.textContent ?? ''); return m !== null && Number(m[1]) < n; },
          seconds,
          { timeout: 2_000 + toleranceMs + 2_000 },
        );
      }
      assert.equal(await w.image.isVisible(), true);
      assert.equal(await w.placeholder.isVisible(), false, 'never «Браузер закрыт»');
      const wait = intervalMs + failure.backOffMs;
      const retry = (await nextViews(page, sent.length, wait + jitterMs + eventTimeoutMs)).at(sent.length);
      const gap = retry.at - failedAt;
      assert.ok(gap >= wait - jitterMs - sendSlackMs && gap <= wait + jitterMs + toleranceMs, `retried after ${gap} ms`);
      // The notice goes with the next answer that is not a failure.
      await page.waitForFunction(() => document.querySelector('.bw-notice')?.textContent === '', null, { timeout: eventTimeoutMs });
    });
  }

  ptest('a stopped session shows «Браузер закрыт» with no image; a new one brings frames back without a reload', async () => {
    await visibleImage(page);
    await page.evaluate(() => {
      window.__sameDocument = true;
    });
    await stack.stopSession();
    await w.placeholder.filter({ hasText: 'Браузер закрыт' }).waitFor({ timeout: eventTimeoutMs });
    assert.equal(await w.image.isVisible(), false);
    assert.equal(await w.image.getAttribute('src'), null);
    await page.screenshot({ path: join(artifacts, 'worker-screen-closed.png'), fullPage: true });

    // Record what the window says from now on, and when: a new session must read «Ждём
    // снимок экрана…» until its first frame, never «Нет открытых вкладок».
    await page.evaluate(() => {
      const text = document.querySelector('.bw-placeholder strong');
      window.__said = [{ text: text.textContent, at: Date.now() }];
      new MutationObserver(() => window.__said.push({ text: text.textContent, at: Date.now() })).observe(text, { childList: true, characterData: true, subtree: true });
    });
    const restartFrom = await page.evaluate(() => Date.now());
    // The new session's first two answers say it has no tab yet, as a worker that has not
    // opened its first one says, so that the window surely waits through two intervals.
    const noTabYet = (route) => route.fulfill({ status: 200, headers: { 'Cache-Control': 'no-store' }, json: { live: true, page: null } });
    await page.route('**/worker/view', noTabYet, { times: 2 });
    // agentfy-dev dev starts a new session 3 s later; the status feed reports it.
    await w.placeholder.filter({ hasText: 'Ждём снимок экрана…' }).waitFor({ timeout: eventTimeoutMs });
    await page.screenshot({ path: join(artifacts, 'worker-screen-waiting.png'), fullPage: true });
    await visibleImage(page);
    const said = await page.evaluate(() => window.__said);
    assert.ok(!said.some((s) => s.text === 'Нет открытых вкладок'), `the window said ${JSON.stringify(said)}`);
    // From the new session's first moment (the feed's word, when the window began to
    // wait) it asks at once, as far as the API's 3-s pace allows, and then every 5 s ±
    // 0.5 s, also while it waits for the first tab: never sooner (the seed, "requests a
    // frame every five seconds"). In the page's clock; the request that brought the frame
    // is the last one counted.
    await page.waitForFunction((from) => window.__viewsSent.some((v) => v.at >= from && v.frame), restartFrom, { timeout: eventTimeoutMs });
    const waitingAt = said.find((s) => s.text === 'Ждём снимок экрана…').at;
    const all = await viewsSent(page);
    // (The window may call fetch a moment before the observer notes the new words.)
    const before = all.filter((v) => v.at < waitingAt - sendSlackMs).at(-1);
    const asked = all.filter((v) => v.at >= waitingAt - sendSlackMs);
    const waited = asked.slice(0, asked.findIndex((v) => v.frame) + 1);
    assert.ok(waited.length >= 3, JSON.stringify(asked));
    const due = Math.max(waitingAt, (before?.at ?? 0) + paceMs);
    assert.ok(waited[0].at - due < toleranceMs, `the new session's first request ${waited[0].at - due} ms after it was due`);
    for (let i = 1; i < waited.length; i++) {
      const gap = waited[i].at - waited[i - 1].at;
      assert.ok(gap >= intervalMs - jitterMs - sendSlackMs, `waiting for the first tab, asked ${gap} ms after the previous request`);
      if (waited[i - 1].status !== 429) {
        assert.ok(gap <= intervalMs + jitterMs + toleranceMs, `waiting for the first tab, asked ${gap} ms after the previous request`);
      }
    }
    assert.match(await w.image.getAttribute('src'), /^blob:/);
    assert.equal(await w.placeholder.isVisible(), false);
    assert.equal(await page.evaluate(() => window.__sameDocument), true, 'no reload');
  });
});

/**
 * feedControl, an init script, lets a test drop the page's status feed as a network
 * would: `__feed.cut()` ends every open stream of the feed and holds its next
 * connections until `__feed.release()`; `__feed.held` counts the connections held, and
 * `__feed.text` is everything the feed delivered to the app.
 */
function feedControl() {
  const original = window.fetch;
  const streams = new Set();
  let gate;
  let unblock = () => {};
  const feed = (window.__feed = {
    text: '',
    held: 0,
    cut() {
      gate ??= new Promise((resolve) => (unblock = resolve));
      for (const ac of streams) {
        ac.abort();
      }
      streams.clear();
    },
    release() {
      gate = undefined;
      unblock();
    },
  });
  window.fetch = async (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    if (!url.includes('/worker/status')) {
      return original.call(window, input, init);
    }
    if (gate) {
      feed.held++;
      await gate;
    }
    const ac = new AbortController();
    streams.add(ac);
    const signal = init?.signal ? AbortSignal.any([init.signal, ac.signal]) : ac.signal;
    const response = await original.call(window, input, { ...init, signal });
    const decoder = new TextDecoder();
    const body = response.body?.pipeThrough(new TransformStream({
      transform(chunk, controller) {
        feed.text += decoder.decode(chunk, { stream: true });
        controller.enqueue(chunk);
      },
    }));
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

/**
 * statusEvents reads the agent's status feed from this process, as the member (beside the
 * page's own): next(accept) resolves with the first event not yet returned that accept
 * takes (the first of all is the current state); close() ends the stream.
 */
async function statusEvents(agent) {
  const ac = new AbortController();
  const res = await fetch(`${r.replicas[0]}/v1/agents/${encodeURIComponent(agent)}/worker/status`, {
    headers: { Authorization: `Bearer ${r.tokens.member}`, Accept: 'text/event-stream' },
    signal: ac.signal,
  });
  assert.equal(res.status, 200);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  const events = [];
  let buffer = '';
  const next = async (accept, timeout = eventTimeoutMs) => {
    const timer = setTimeout(() => ac.abort(new Error(`no such status event within ${timeout} ms`)), timeout);
    try {
      for (;;) {
        while (events.length > 0) {
          const event = events.shift();
          if (accept(event)) {
            return event;
          }
        }
        const { value, done } = await reader.read();
        if (done) {
          throw new Error('the status feed ended');
        }
        buffer += value;
        const blocks = buffer.split('\n\n');
        buffer = blocks.pop();
        for (const block of blocks) {
          const lines = block.split('\n');
          if (lines.includes('event: status')) {
            events.push(JSON.parse(lines.filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n')));
          }
        }
      }
    } finally {
      clearTimeout(timer);
    }
  };
  return { next, close: () => ac.abort() };
}

describe('a session that stops while the status feed is away', () => {
  let page;
  after(async () => page?.close());

  ptest('the old session\'s {"live":false}, answered after the feed named a new session, does not close the new one', async () => {
    page = await browser.context.newPage();
    await page.bringToFront();
    await page.addInitScript(feedControl);
    await page.goto(`${r.app}#/agents/${r.agent}/worker?token=${encodeURIComponent(r.tokens.member)}`);
    const w = windowOf(page);
    await visibleImage(page);
    await page.getByText(/^Сессия агента: (работает|ожидает)$/).waitFor({ timeout: eventTimeoutMs });
    const feed = await statusEvents(r.agent);
    let pending; // the view request held on its way, until it is answered
    try {
      const old = await feed.next((e) => e.live);
      await page.evaluate(() => {
        const text = document.querySelector('.bw-placeholder strong');
        window.__said = [];
        new MutationObserver(() => window.__said.push(text.textContent)).observe(text, { childList: true, characterData: true, subtree: true });
      });
      // The page's feed drops and cannot reconnect: the window goes on asking the view
      // route alone, and shows the old session's frames.
      await page.evaluate(() => window.__feed.cut());
      await page.waitForFunction(() => window.__feed.held > 0, null, { timeout: eventTimeoutMs });
      // Its next view request is held on its way; meanwhile the old session stops, and
      // the API's answer to that request is {"live":false}. In that order: the request
      // held first, then the stop, then the answer, before the stack starts the next
      // session 3 s after the stop (a stop sent beside the wait for the request, which
      // may come 5.5 s later, let the next session start first: once in two runs with
      // two test files at a time).
      let hold;
      const caught = new Promise((resolve, reject) => {
        hold = resolve;
        setTimeout(() => reject(new Error('the window sent no view request')), eventTimeoutMs).unref();
      });
      await page.route('**/worker/view', (route) => hold(route), { times: 1 });
      pending = await caught;
      await stack.stopSession();
      const answer = await pending.fetch();
      assert.deepEqual(await answer.json(), { live: false }, 'the old session stopped: no session is live');
      // agentfy-dev dev starts a new session; the page's feed comes back and names it.
      const fresh = await feed.next((e) => e.live && e.sessionId !== old.sessionId);
      await page.evaluate(() => window.__feed.release());
      await page.waitForFunction((id) => window.__feed.text.includes(id), fresh.sessionId, { timeout: eventTimeoutMs });
      // Only now does the old session's answer arrive.
      const shown = await w.image.getAttribute('src');
      await pending.fulfill({ response: answer });
      pending = undefined;
      // It is the old session's word, not the new one's: the window asks again and shows
      // the new session's frames, and never says «Браузер закрыт».
      const outcome = await page.waitForFunction((src) => {
        const placeholder = document.querySelector('.bw-placeholder:not([hidden]) strong');
        if (placeholder?.textContent === 'Браузер закрыт') {
          return 'closed';
        }
        const img = document.querySelector('.bw-open:not([hidden]) .bw-image[src]');
        return img !== null && img.getAttribute('src') !== src ? 'frame' : false;
      }, shown, { timeout: eventTimeoutMs });
      assert.equal(await outcome.jsonValue(), 'frame', 'the old session\'s {"live":false} closed the new session');
      const said = await page.evaluate(() => window.__said);
      assert.ok(!said.includes('Браузер закрыт'), `the window said ${JSON.stringify(said)}`);
    } finally {
      feed.close();
      await pending?.abort().catch(() => {});
      await page.evaluate(() => window.__feed.release()).catch(() => {});
    }
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
    // The feed answered: the window does not fall back on the view route, not even once
    // its wait for the feed's first word is over.
    await pause(feedSilenceMs + toleranceMs);
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
