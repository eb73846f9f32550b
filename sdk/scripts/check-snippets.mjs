// Type-checks every TypeScript snippet (```ts) of the root README, every Markdown file of
// the root's docs/ and this package's README under --strict, as a caller's module
// importing '@agentfy/sdk' (the built package, through its `exports`). Exit 1 with tsc's
// errors, naming the snippet.

import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

// Named by where they are: docs/operating.md's snippets are docs-operating-<n>.ts.
const readmes = { root: '../README.md', sdk: 'README.md' };
for (const file of readdirSync('../docs').filter((f) => f.endsWith('.md')).sort()) {
  readmes[`docs-${file.slice(0, -'.md'.length)}`] = `../docs/${file}`;
}
const dir = '.snippets';
rmSync(dir, { recursive: true, force: true });
mkdirSync(dir);
let count = 0;
try {
  for (const [name, path] of Object.entries(readmes)) {
    const text = readFileSync(path, 'utf8');
    const blocks = [...text.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
    blocks.forEach((code, i) => {
      // `export {}` makes each file a module of its own (top-level await, no shared names).
      writeFileSync(join(dir, `${name}-${i + 1}.ts`), `${code}\nexport {};\n`);
      count++;
    });
  }
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'es2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        lib: ['es2022', 'dom', 'dom.iterable'],
        types: ['node'],
        strict: true,
        noEmit: true,
      },
      include: ['*.ts'],
    }),
  );
  if (count === 0) {
    throw new Error('no ```ts snippet found in the READMEs and docs');
  }
  execFileSync('npx', ['--no-install', 'tsc', '-p', join(dir, 'tsconfig.json')], { stdio: 'inherit' });
  console.log(`sdk: ${count} TypeScript snippets of the READMEs and docs type-check under --strict`);
} catch (err) {
  console.error(`sdk: README snippets (${dir}/<readme>-<n>.ts, kept for reading): ${err.message}`);
  process.exitCode = 1;
} finally {
  if (!process.exitCode) {
    rmSync(dir, { recursive: true, force: true });
  }
}
