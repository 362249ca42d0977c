import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from '../helpers/process.ts';

// §22.1 and STYLE's "one door": mail someone else wrote is parsed only in the MIME pool's thread.
// No other module of the app or the dashboard may import a MIME parser or decoder, so the next
// feature cannot parse on an event loop again.
const PARSERS = ['mailparser', 'libqp', 'libmime', 'email-reply-parser', 'mailsplit'];
const DOOR = new Set(['src/platform/mime-worker.ts']);
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|\brequire\s*\(\s*|^\s*import\s+)['"]([^'"]+)['"]/gm;

function* sources(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* sources(full);
    else if (/\.(ts|tsx|js|mjs|cjs)$/.test(entry.name)) yield full;
  }
}

const parserOf = (specifier: string) => PARSERS.find((p) => specifier === p || specifier.startsWith(`${p}/`));

test('only the MIME pool\'s thread imports mailparser, libqp, libmime or the reply parser', () => {
  const offenders: string[] = [];
  let doorSeen = false;
  for (const file of [...sources(path.join(ROOT, 'src')), ...sources(path.join(ROOT, 'dashboard'))]) {
    const rel = path.relative(ROOT, file);
    for (const [, specifier] of readFileSync(file, 'utf8').matchAll(SPECIFIER)) {
      if (!parserOf(specifier!)) continue;
      if (DOOR.has(rel)) doorSeen = true;
      else offenders.push(`${rel} imports ${specifier}`);
    }
  }
  assert.deepEqual(offenders, []);
  assert.ok(doorSeen, 'the scan finds the door\'s own imports (it reads import statements at all)');
});
