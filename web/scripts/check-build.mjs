// Fails (exit 1, with a diff) when the committed static/js/ differs from a fresh build of
// src/ and ../sdk/src/. Run by `npm run check` and scripts/test-web.sh.

import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const fresh = mkdtempSync(join(tmpdir(), 'agentfy-web-'));
try {
  execFileSync('npx', ['--no-install', 'tsc', '-p', 'tsconfig.json', '--outDir', fresh], { stdio: 'inherit' });
  const diff = spawnSync('diff', ['-ru', 'static/js', fresh], { encoding: 'utf8' });
  if (diff.status !== 0) {
    process.stderr.write(diff.stdout + diff.stderr);
    process.stderr.write('web: static/js/ is not what src/ builds to; run `npm run build` in web/ and commit.\n');
    process.exitCode = 1;
  } else {
    console.log('web: static/js/ matches a fresh build');
  }
} finally {
  rmSync(fresh, { recursive: true, force: true });
}
