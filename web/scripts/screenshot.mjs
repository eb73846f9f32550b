// Opens the web app at a URL in Debian's Chromium, waits until the «Браузер агента»
// window shows a decoded frame, and saves a screenshot: how the compose test looks at
// the stack as a person would (scripts/test-compose.sh).
//
//   node web/scripts/screenshot.mjs URL out.png
import { startBrowser } from '../test/harness.mjs';

const [url, out] = process.argv.slice(2);
if (!url || !out) {
  console.error('usage: node web/scripts/screenshot.mjs URL out.png');
  process.exit(2);
}
const browser = await startBrowser();
try {
  const page = await browser.context.newPage();
  await page.goto(url);
  await page.waitForFunction(
    () => {
      const img = document.querySelector('.bw-image');
      return img !== null && !img.hidden && img.complete && img.naturalWidth > 0;
    },
    undefined,
    { timeout: 60_000 },
  );
  const title = await page.locator('.bw-page-title').textContent();
  await page.screenshot({ path: out });
  console.log(`screenshot: the window shows a frame of ${JSON.stringify(title)} (${out})`);
} finally {
  await browser.close();
}
