// Builds the production bundle into dist/ without ever deleting or rewriting a file another
// process may be loading, so any number of `npm start`, `start:api` and `start:worker` can start
// at once from one checkout.
//
// - Each build goes to its own folder, dist/.b/<fingerprint>/, named by a hash of what it is built
//   from. It is built under a temporary name and renamed into place in one step, and never
//   changed afterwards.
// - dist/main.js, api.js, worker.js and cli.js are one-line files that import the current build.
//   Each is replaced with one rename, so a process reads either the old or the new one, whole,
//   and both point at builds that exist.
// - A build whose fingerprint is already in place is skipped: a start with nothing changed costs
//   a hash of the sources.
// - Builds other than the current one are removed only once a day old, so a process still
//   running an older build keeps its lazily loaded chunks.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DIST = path.join(ROOT, 'dist');
const BUILDS = path.join(DIST, '.b');
const ENTRIES = ['main', 'api', 'worker', 'cli'];
// Started by path from inside the build (src/templates/threads.ts), never through a stub.
const THREADS = ['template-thread'];
const OPTIONS = {
  entryPoints: [...ENTRIES, ...THREADS].map((e) => path.join(ROOT, 'src', `${e}.ts`)),
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node24',
  packages: 'external',
  jsx: 'automatic',
  jsxImportSource: 'hono/jsx',
  sourcemap: true,
  logLevel: 'warning',
};
const KEEP_OLD_BUILDS_MS = 24 * 3600 * 1000;

function* files(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* files(full);
    else if (entry.isFile()) yield full;
  }
}

/** A hash of every input: the sources, the dependency lock, this script and its options. */
function fingerprint() {
  const hash = createHash('sha256');
  const inputs = [
    ...files(path.join(ROOT, 'src')),
    ...files(path.join(ROOT, 'dashboard')),
    path.join(ROOT, 'package.json'),
    path.join(ROOT, 'package-lock.json'),
    fileURLToPath(import.meta.url),
  ];
  for (const file of inputs) {
    hash.update(path.relative(ROOT, file)).update('\0').update(readFileSync(file)).update('\0');
  }
  return hash.digest('hex').slice(0, 16);
}

const stub = (id, entry) => `// The current build; written by scripts/build.mjs.\nimport "./.b/${id}/${entry}.js";\n`;

/** Writes a file under a temporary name and renames it into place: readers see old or new, whole. */
function replaceFile(file, text) {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, file);
}

const id = fingerprint();
const target = path.join(BUILDS, id);
mkdirSync(BUILDS, { recursive: true });

if (!existsSync(path.join(target, 'main.js'))) {
  const tmp = path.join(BUILDS, `.${id}.${process.pid}.tmp`);
  rmSync(tmp, { recursive: true, force: true });
  await build({ ...OPTIONS, outdir: tmp });
  try {
    renameSync(tmp, target);
  } catch (err) {
    // Another start built the same sources first; its folder is identical. This one is ours alone.
    if (!['ENOTEMPTY', 'EEXIST'].includes(err.code)) throw err;
    rmSync(tmp, { recursive: true, force: true });
  }
}

for (const entry of ENTRIES) {
  const file = path.join(DIST, `${entry}.js`);
  const text = stub(id, entry);
  if (!existsSync(file) || readFileSync(file, 'utf8') !== text) replaceFile(file, text);
}

const now = Date.now();
for (const name of readdirSync(BUILDS)) {
  if (name === id) continue;
  const dir = path.join(BUILDS, name);
  try {
    if (now - statSync(dir).mtimeMs > KEEP_OLD_BUILDS_MS) rmSync(dir, { recursive: true, force: true });
  } catch {
    // Removed meanwhile by another build.
  }
}
