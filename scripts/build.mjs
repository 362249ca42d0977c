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
// - A build is never removed while a process runs from it, however old: its lazily loaded chunks
//   must stay. Each stub records the pid of the process it starts in its build's `.pids/`, and an
//   older build goes only once no recorded process is alive and a grace period has passed since
//   it stopped being current (a process that read the old stub a moment before it was replaced
//   records its pid within that).
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DIST = path.join(ROOT, 'dist');
const BUILDS = path.join(DIST, '.b');
const ENTRIES = ['main', 'api', 'worker', 'cli'];
// Started by path from inside the build (src/templates/threads.ts, src/contacts/imports/thread.ts,
// src/platform/mime-pool.ts), never through a stub.
const THREADS = ['template-thread', 'contacts-import-thread', 'mime-thread'];
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
/** How long after it stopped being current a build with no live process may be removed. */
const RETIRED_GRACE_MS = 5_000;
/** A half-written build (`.<id>.<pid>.tmp`) left by a build that died is removed after this. */
const KEEP_TMP_MS = 24 * 3600 * 1000;

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

// The stub records its process in the build's .pids/ before loading it, so no later build removes
// the files this process may still load.
const stub = (id, entry) => `// The current build; written by scripts/build.mjs.
import { mkdirSync, writeFileSync } from "node:fs";
const pids = new URL("./.b/${id}/.pids/", import.meta.url);
mkdirSync(pids, { recursive: true });
writeFileSync(new URL(String(process.pid), pids), "");
await import("./.b/${id}/${entry}.js");
`;

/** Whether a process with this pid is alive (EPERM: alive, someone else's). */
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

/** Whether any process recorded in a build's .pids/ still runs; the dead ones' records go. */
function inUse(dir) {
  let used = false;
  const pids = path.join(dir, '.pids');
  for (const name of existsSync(pids) ? readdirSync(pids) : []) {
    if (/^\d+$/.test(name) && alive(Number(name))) used = true;
    else rmSync(path.join(pids, name), { force: true });
  }
  return used;
}

/** The build the stubs point at now, if any. */
function currentBuild() {
  const file = path.join(DIST, 'main.js');
  return existsSync(file) ? /\.b\/([0-9a-f]+)\//.exec(readFileSync(file, 'utf8'))?.[1] : undefined;
}

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

// The build being replaced is marked retired now: the grace before its removal counts from here.
const previous = currentBuild();
if (previous && previous !== id && existsSync(path.join(BUILDS, previous))) {
  writeFileSync(path.join(BUILDS, previous, '.retired'), String(Date.now()));
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
    if (name.startsWith('.')) {
      if (now - statSync(dir).mtimeMs > KEEP_TMP_MS) rmSync(dir, { recursive: true, force: true });
      continue;
    }
    const retired = path.join(dir, '.retired');
    // A build retired before this scheme began starts its grace now.
    if (!existsSync(retired)) writeFileSync(retired, String(now));
    if (now - Number(readFileSync(retired, 'utf8')) < RETIRED_GRACE_MS) continue;
    if (!inUse(dir)) rmSync(dir, { recursive: true, force: true });
  } catch {
    // Removed meanwhile by another build.
  }
}
