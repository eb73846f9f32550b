import { readFileSync } from 'node:fs';
import { startBrowser } from '../test/harness.mjs';
const r = JSON.parse(readFileSync('/tmp/ready.json', 'utf8'));
const b = await startBrowser();
try {
  for (const [w, h] of [[1280, 720], [360, 740]]) {
    const page = await b.context.newPage();
    await page.setViewportSize({ width: w, height: h });
    await page.goto(`${r.app}#token=${r.tokens.member}`);
    await page.waitForSelector('.agents');
    await page.screenshot({ path: `/tmp/shots/home-${w}.png` });
    await page.goto(`${r.app}#/agents/${r.agent}/worker`);
    await page.waitForFunction(() => { const i = document.querySelector('.bw-image'); return i && i.complete && i.naturalWidth > 0; }, undefined, { timeout: 60000 });
    await page.screenshot({ path: `/tmp/shots/worker-${w}.png` });
    await page.click('.bw-open');
    await page.screenshot({ path: `/tmp/shots/full-${w}.png` });
    await page.keyboard.press('Escape');
    await page.goto(`${r.app}#/agents/agent-nope/worker`);
    await page.waitForSelector('text=Агент не найден');
    await page.screenshot({ path: `/tmp/shots/notfound-${w}.png` });
    await page.close();
  }
} finally { await b.close(); }
