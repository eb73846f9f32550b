// Fails (exit 1, with a diff) when the committed src/gen/ differs from a fresh generation
// of ../openapi/openapi.yaml, or the committed dist/ from a fresh build of src/. Run by
// `npm run check` and scripts/test-web.sh.

import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

function same(committed, fresh, fix) {
  const diff = spawnSync('diff', ['-ru', committed, fresh], { encoding: 'utf8' });
  if (diff.status !== 0) {
    process.stderr.write(diff.stdout + diff.stderr);
    process.stderr.write(`sdk: ${committed}/ is not what its sources make; ${fix} and commit.\n`);
    process.exitCode = 1;
    return;
  }
  console.log(`sdk: ${committed}/ matches a fresh build`);
}

const tmp = mkdtempSync(join(tmpdir(), 'agentfy-sdk-'));
try {
  const gen = join(tmp, 'gen');
  execFileSync('npx', ['--no-install', 'openapi-ts'], {
    env: { ...process.env, AGENTFY_SDK_OUT: gen },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  same('src/gen', gen, 'run `npm run generate` in sdk/');
  const dist = join(tmp, 'dist');
  execFileSync('npx', ['--no-install', 'tsc', '-p', 'tsconfig.build.json', '--outDir', dist], { stdio: 'inherit' });
  same('dist', dist, 'run `npm run build` in sdk/');
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
