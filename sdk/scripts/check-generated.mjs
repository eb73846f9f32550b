// Fails (exit 1, with a diff) when the committed src/ differs from a fresh generation of
// ../openapi/openapi.yaml. Run by `npm run check` and scripts/test-web.sh.

import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const fresh = mkdtempSync(join(tmpdir(), 'agentfy-sdk-'));
try {
  execFileSync('npx', ['--no-install', 'openapi-ts'], {
    env: { ...process.env, AGENTFY_SDK_OUT: fresh },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const diff = spawnSync('diff', ['-ru', 'src', fresh], { encoding: 'utf8' });
  if (diff.status !== 0) {
    process.stderr.write(diff.stdout + diff.stderr);
    process.stderr.write('sdk: src/ is not what openapi/openapi.yaml generates; run `npm run generate` in sdk/ and commit.\n');
    process.exitCode = 1;
  } else {
    console.log('sdk: src/ matches a fresh generation');
  }
} finally {
  rmSync(fresh, { recursive: true, force: true });
}
