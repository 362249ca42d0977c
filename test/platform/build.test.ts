import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from '../helpers/process.ts';

// §18.13: a running process keeps its build. scripts/build.mjs itself, on a checkout of its own
// whose entry points are small: a process that loads a chunk lazily, as the API does.
const NODE = path.join(ROOT, 'node_modules/.bin/node');
const dir = mkdtempSync(path.join(os.tmpdir(), 'mailroom-build-'));
after(() => rmSync(dir, { recursive: true, force: true }));
mkdirSync(path.join(dir, 'scripts'));
mkdirSync(path.join(dir, 'src'));
mkdirSync(path.join(dir, 'dashboard'));
copyFileSync(path.join(ROOT, 'scripts/build.mjs'), path.join(dir, 'scripts/build.mjs'));
symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
writeFileSync(path.join(dir, 'package.json'), '{"type":"module"}');
writeFileSync(path.join(dir, 'package-lock.json'), '{}');
for (const entry of ['main', 'worker', 'cli', 'template-thread', 'contacts-import-thread', 'mime-thread']) writeFileSync(path.join(dir, `src/${entry}.ts`), 'export {};\n');
// Loads its chunk only when asked on stdin, long after it started.
writeFileSync(path.join(dir, 'src/api.ts'), `
process.stdout.write('ready\\n');
process.stdin.on('data', async () => {
  const { version } = await import('./later.ts');
  process.stdout.write('loaded ' + version + '\\n');
});
`);
const version = (v: number) => writeFileSync(path.join(dir, 'src/later.ts'), `export const version = ${v};\n`);
const build = () => {
  const r = spawnSync(NODE, [path.join(dir, 'scripts/build.mjs')], { cwd: dir, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
};
const builds = () => readdirSync(path.join(dir, 'dist/.b')).filter((n) => !n.startsWith('.'));

test('a later build never deletes the build a running process loads from; it goes once no process uses it', async () => {
  version(1);
  build();
  const [first] = builds();
  const api = spawn(NODE, [path.join(dir, 'dist/api.js')], { cwd: dir, stdio: ['pipe', 'pipe', 'pipe'] });
  after(() => api.kill('SIGKILL'));
  let out = '';
  api.stdout.on('data', (d) => { out += d; });
  let err = '';
  api.stderr.on('data', (d) => { err += d; });
  const until = async (what: string, done: () => boolean) => {
    for (const deadline = Date.now() + 10_000; !done();) {
      assert.ok(Date.now() < deadline, `${what}; stdout ${out} stderr ${err}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  await until('the process starts', () => out.includes('ready'));

  // The process has run for days; the sources changed and a later build is made.
  const old = new Date(Date.now() - 3 * 86_400_000);
  utimesSync(path.join(dir, 'dist/.b', first!), old, old);
  version(2);
  build();
  await new Promise((r) => setTimeout(r, 5_500));
  build();
  assert.equal(builds().length, 2);
  assert.ok(existsSync(path.join(dir, 'dist/.b', first!)), 'the running process\'s build is kept');
  api.stdin.write('load\n');
  await until('the lazy chunk loads', () => /loaded \d/.test(out));
  assert.match(out, /loaded 1/, 'from its own build');

  // Once no process uses it (and its grace has passed), the next build removes it.
  api.kill('SIGKILL');
  await new Promise((r) => api.on('exit', r));
  build();
  assert.deepEqual(builds().filter((b) => b === first), []);
  assert.equal(builds().length, 1);
});
