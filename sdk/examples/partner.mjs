// A partner's viewer in plain JavaScript (Node 20, no TypeScript): watches an agent's
// browser with the organisation's key, saves each frame as frame.jpg, and says what
// every other answer means. Stops after AGENTFY_FRAMES frames (default: never), on
// Ctrl-C, or when the browser closes.
//
//   AGENTFY_URL=http://127.0.0.1:8080 AGENTFY_ORG=org-acme AGENTFY_AGENT=agent-scout \
//   AGENTFY_ORG_KEY=afk_… node partner.mjs

import { writeFileSync } from 'node:fs';
import { createClient, isClientError, watchWorkerView } from '@agentfy/sdk';

const env = (name) => process.env[name] || (console.error(`set ${name}`), process.exit(2));
const api = createClient({ baseUrl: env('AGENTFY_URL') });
const maxFrames = Number(process.env.AGENTFY_FRAMES || Infinity);
const stop = new AbortController();
process.once('SIGINT', () => stop.abort());

let frames = 0;
const end = await watchWorkerView({
  client: api,
  auth: env('AGENTFY_ORG_KEY'),
  orgId: env('AGENTFY_ORG'),
  agentId: env('AGENTFY_AGENT'),
  signal: stop.signal,
  onUpdate(update) {
    switch (update.kind) {
      case 'frame':
        writeFileSync('frame.jpg', Buffer.from(update.page.data, 'base64'));
        console.log(`frame: ${update.page.title || '(no title)'} — ${update.page.url} at ${update.page.capturedAt}`);
        if (++frames >= maxFrames) stop.abort();
        break;
      case 'noTab':
        console.log('the browser is open, with no tab');
        break;
      case 'unavailable':
        // 429, 503 or no answer: temporary, never a closed browser. Keep the last frame.
        console.log(`no frame this time (${update.status ?? (isClientError(update.error) ? 'no answer' : '?')} ${update.error.error.code})`);
        break;
      case 'closed':
        console.log('the browser is closed');
        break;
    }
  },
});
if (end.reason === 'unauthenticated' || end.reason === 'forbidden' || end.reason === 'notFound') {
  console.error(`refused: ${end.status} ${end.error.error.code} — ${end.error.error.message}`);
  process.exitCode = 1;
} else {
  console.log(`done: ${end.reason}, ${frames} frame(s)`);
}
