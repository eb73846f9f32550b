// Test harness: the real local stack (`agentfy-dev dev`) and a Chromium driven by
// playwright-core. Everything started here is stopped by the returned close functions,
// which the tests call in `after` hooks, also when a test fails.

import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, request as httpRequest } from 'node:http';
import { mkdtemp, readFile, rm, watch } from 'node:fs/promises';
import { openSync, closeSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** Bounds of the harness's waits. */
const stackReadyTimeoutMs = 90_000;
const stopTimeoutMs = 15_000;
const chromiumStartTimeoutMs = 30_000;

const run = promisify(execFile);

/**
 * agentfyBinaries returns the development CLI, whose `dev` runs the stack, and the
 * operator CLI, which stops a session as a person would: $AGENTFY_BIN and $AGENTFY_CLI,
 * or ./cmd/agentfy-dev and ./cmd/agentfy built into dir (scripts/test-web.sh builds them
 * once for every test file).
 */
async function agentfyBinaries(dir) {
  if (process.env.AGENTFY_BIN && process.env.AGENTFY_CLI) {
    return { dev: process.env.AGENTFY_BIN, cli: process.env.AGENTFY_CLI };
  }
  await run('go', ['build', '-o', dir + '/', './cmd/agentfy-dev', './cmd/agentfy'], { cwd: repoRoot, timeout: 300_000 });
  return { dev: join(dir, 'agentfy-dev'), cli: join(dir, 'agentfy') };
}

/**
 * startStack runs `agentfy-dev dev` in its own process group and resolves with the parsed
 * ready file once the stack answers. `close()` stops the whole group (redis, NATS,
 * Chromium of the demo agent). `env` is added to the command's environment (an identity
 * provider's AGENTFY_JWT_* variables, say).
 */
export async function startStack({ restartAfter = '3s', env = {} } = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'agentfy-web-test-'));
  const { dev: bin, cli } = await agentfyBinaries(dir);
  const readyPath = join(dir, 'ready.json');
  const logPath = join(dir, 'dev.log');
  const log = openSync(logPath, 'a');
  const child = spawn(bin, ['dev', '--ready-file', readyPath, '--restart-after', restartAfter], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    detached: true, // its own process group, so close() reaches every descendant
    stdio: ['ignore', log, log],
  });
  closeSync(log);
  groups.add(child.pid);
  const exited = once(child, 'exit');

  const close = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      killGroup(child.pid, 'SIGTERM');
      const timer = setTimeout(() => killGroup(child.pid, 'SIGKILL'), stopTimeoutMs);
      await exited;
      clearTimeout(timer);
    }
    killGroup(child.pid, 'SIGKILL'); // anything the dev command left behind
    groups.delete(child.pid);
    await rm(dir, { recursive: true, force: true });
  };

  try {
    await waitForFile(readyPath, exited, stackReadyTimeoutMs);
  } catch (err) {
    const tail = existsSync(logPath) ? readFileSync(logPath, 'utf8').slice(-4000) : '';
    await close();
    throw new Error(`agentfy-dev dev did not become ready: ${err.message}\n${tail}`);
  }
  const ready = JSON.parse(await readFile(readyPath, 'utf8'));

  /**
   * stopSession stops the demo session with the operator CLI, as a person would: with
   * the operator's Redis URL and NATS credential, as the dev banner exports them (the
   * CLI records the change in the audit trail, and exits 3 when it could not).
   */
  const stopSession = async (agent = ready.agent) => {
    await run(cli, ['session', 'stop', '-agent', agent], {
      cwd: repoRoot,
      env: { ...process.env, AGENTFY_REDIS_URL: ready.redis, AGENTFY_NATS_URL: ready.nats, AGENTFY_NATS_PASSWORD: ready.natsOperator.password },
      timeout: 30_000,
    });
  };
  return { ready, stopSession, close };
}

/**
 * Process groups started here and not yet stopped. If the test process ends without its
 * `after` hooks (a signal from `timeout`, a crash), they are killed on the way out.
 */
const groups = new Set();
process.on('exit', () => {
  for (const pid of groups) {
    killGroup(pid, 'SIGKILL');
  }
});
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => process.exit(128 + (signal === 'SIGINT' ? 2 : 15)));
}

function killGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch {
    // Already gone.
  }
}

/** waitForFile resolves when path exists (it is written by an atomic rename). */
async function waitForFile(path, exited, timeoutMs) {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new Error(`no ${path} after ${timeoutMs} ms`)), timeoutMs);
  try {
    const appeared = (async () => {
      const watcher = watch(dirname(path), { signal: ac.signal });
      if (existsSync(path)) {
        return;
      }
      for await (const _ of watcher) {
        if (existsSync(path)) {
          return;
        }
      }
    })();
    const died = exited.then(([code, signal]) => {
      throw new Error(`agentfy-dev dev exited (${code ?? signal})`);
    });
    await Promise.race([appeared, died]);
  } catch (err) {
    throw ac.signal.aborted ? ac.signal.reason : err;
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
}

/** The Chromium flags the project uses (see shared NOTES.md). */
export const chromiumArgs = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];

/**
 * startBrowser runs Debian's Chromium and connects playwright-core to it over CDP with
 * `noDefaults`. Why not chromium.launch(): Playwright turns on focus emulation for every
 * page it creates, which keeps each page "visible" forever, so a test could never see
 * `document.visibilityState === 'hidden'`. Pages of the browser's own context are tabs of
 * one window, exactly as a person's: the tab in front is visible, the others are hidden.
 */
export async function startBrowser() {
  const dir = await mkdtemp(join(tmpdir(), 'agentfy-web-chromium-'));
  const proc = spawn(
    '/usr/bin/chromium',
    [
      ...chromiumArgs,
      '--remote-debugging-port=0',
      `--user-data-dir=${dir}`,
      '--no-first-run',
      '--disable-component-update',
      '--disable-sync',
      '--window-size=1280,900',
      'about:blank',
    ],
    { detached: true, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  groups.add(proc.pid);
  const exited = once(proc, 'exit');
  const close = async () => {
    await browser?.close().catch(() => {});
    if (proc.exitCode === null && proc.signalCode === null) {
      killGroup(proc.pid, 'SIGTERM');
      const timer = setTimeout(() => killGroup(proc.pid, 'SIGKILL'), stopTimeoutMs);
      await exited;
      clearTimeout(timer);
    }
    killGroup(proc.pid, 'SIGKILL'); // renderer and helper processes
    groups.delete(proc.pid);
    await rm(dir, { recursive: true, force: true });
  };
  let browser;
  try {
    const endpoint = await new Promise((resolve, reject) => {
      let err = '';
      const timer = setTimeout(() => reject(new Error('Chromium did not start')), chromiumStartTimeoutMs);
      const onData = (chunk) => {
        err = (err + chunk).slice(-8000);
        const m = /DevTools listening on (ws:\/\/\S+)/.exec(err);
        if (m) {
          clearTimeout(timer);
          proc.stderr.off('data', onData);
          resolve(m[1]);
        }
      };
      proc.stderr.on('data', onData);
      exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`Chromium exited: ${err.slice(-2000)}`));
      });
    });
    proc.stderr.resume();
    browser = await chromium.connectOverCDP(endpoint, { noDefaults: true, isLocal: true });
  } catch (err) {
    await close();
    throw err;
  }
  const context = browser.contexts()[0];
  return { browser, context, close };
}

/**
 * artifacts is where the web tests leave screenshots, and (under failures/) a Playwright
 * trace and a screenshot of every open page for each failed test. scripts/test-web.sh
 * names it with AGENTFY_WEB_ARTIFACTS and prints it.
 */
export const artifacts = resolve(repoRoot, process.env.AGENTFY_WEB_ARTIFACTS || '.artifacts/web');

/**
 * traced wraps a test body: the browser context records a trace chunk while it runs,
 * kept (with screenshots of every page) only when the body fails. Open one with
 * `npx playwright-core show-trace <file>` (web/).
 */
export function traced(getContext, name, fn) {
  return async (t) => {
    const context = getContext();
    const { mkdir } = await import('node:fs/promises');
    await context.tracing.startChunk({ title: name });
    try {
      await fn(t);
      await context.tracing.stopChunk();
    } catch (err) {
      const dir = join(artifacts, 'failures');
      await mkdir(dir, { recursive: true });
      const slug = name.replace(/[^\p{L}\p{N}]+/gu, '-').slice(0, 80);
      await context.tracing.stopChunk({ path: join(dir, `${slug}.trace.zip`) }).catch(() => {});
      let i = 0;
      for (const page of context.pages()) {
        await page.screenshot({ path: join(dir, `${slug}-${++i}.png`), fullPage: true }).catch(() => {});
      }
      console.error(`web: ${name} failed; trace and screenshots in ${dir}`);
      throw err;
    }
  };
}

/**
 * startBufferingProxy serves target (a replica's http://host:port) on a loopback port of
 * its own as a reverse proxy that buffers server-sent events, as a proxy that ignores
 * `X-Accel-Buffering: no` does: every request and answer passes through, but the body of
 * a `text/event-stream` answer is held until the upstream stream ends (the status feed's
 * ends after an hour), so the page gets the feed's 200 and headers and never an event.
 * `url` is the proxy's origin; close() stops it and every connection through it.
 */
export async function startBufferingProxy(target) {
  const upstream = new URL(target);
  const hopByHop = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer']);
  const pass = (headers) => Object.fromEntries(Object.entries(headers).filter(([name]) => !hopByHop.has(name)));
  const held = new Set();
  const server = createServer((req, res) => {
    const up = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...pass(req.headers), host: upstream.host } },
      (answer) => {
        res.writeHead(answer.statusCode, pass(answer.headers));
        if (String(answer.headers['content-type']).startsWith('text/event-stream')) {
          res.flushHeaders();
          held.add(res);
          const chunks = [];
          answer.on('data', (chunk) => chunks.push(chunk));
          answer.on('end', () => res.end(Buffer.concat(chunks)));
        } else {
          answer.pipe(res);
        }
      },
    );
    up.on('error', () => res.destroy());
    // The page went away (or the answer is complete): let the upstream request go too,
    // so that the API closes its stream and frees the caller's place under its cap.
    res.on('close', () => {
      held.delete(res);
      up.destroy();
    });
    req.pipe(up);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    /** streams is how many event streams the proxy holds back now. */
    streams: () => held.size,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close').catch(() => {});
    },
  };
}

/**
 * recordViews makes every page of context note, in the page itself, each view request it
 * sends (`window.__viewsSent`: `{ at, status, live, frame }`: the page's Date.now() when
 * the app called fetch, the answer's status — 'failed' for none — and what its body said),
 * each answer of the status feed (`window.__feedAnswers`: `{ at, status }`, at the page's
 * Date.now() when the headers arrived), and when the window's toggle was last clicked and
 * the document last became visible or hidden (`window.__marks`). Timings taken in the
 * page are free of the delay with which Playwright reports events to a loaded test.
 */
export async function recordViews(context) {
  await context.addInitScript(() => {
    const sent = (window.__viewsSent = []);
    const feedAnswers = (window.__feedAnswers = []);
    const marks = (window.__marks = {});
    const original = window.fetch;
    window.fetch = (input, init) => {
      const url = input instanceof Request ? input.url : String(input);
      const at = Date.now();
      const answer = original.call(window, input, init);
      if (url.includes('/worker/view')) {
        const entry = { at, status: undefined, live: undefined, frame: false };
        sent.push(entry);
        answer.then(
          (response) => {
            entry.status = response.status;
            response.clone().json().then((body) => {
              entry.live = body?.live;
              entry.frame = Boolean(body?.page);
            }, () => {});
          },
          () => (entry.status = 'failed'),
        );
      } else if (url.includes('/worker/status')) {
        answer.then((response) => feedAnswers.push({ at: Date.now(), status: response.status }), () => feedAnswers.push({ at: Date.now(), status: 'failed' }));
      }
      return answer;
    };
    document.addEventListener('visibilitychange', () => (marks[document.visibilityState] = Date.now()), true);
    document.addEventListener('click', (event) => {
      if (event.target instanceof Element && event.target.closest('.bw-toggle')) {
        marks.toggle = Date.now();
      }
    }, true);
  });
}

/** viewsSent returns the page's record of its view requests (recordViews). */
export const viewsSent = (page) => page.evaluate(() => window.__viewsSent.map((v) => ({ ...v })));

/** marks returns the page's record of toggle clicks and visibility changes (recordViews). */
export const marks = (page) => page.evaluate(() => ({ ...window.__marks }));

/** feedAnswers returns the page's record of the status feed's answers (recordViews). */
export const feedAnswers = (page) => page.evaluate(() => window.__feedAnswers.map((a) => ({ ...a })));

/**
 * nextViews waits until the page has sent more than n view requests (generous timeout:
 * under load a poll may be seconds late) and returns the record.
 */
export async function nextViews(page, n, timeout = 30_000) {
  await page.waitForFunction((n) => window.__viewsSent.length > n, n, { timeout });
  return viewsSent(page);
}
