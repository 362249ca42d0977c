import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '../..');
const README = path.join(ROOT, 'README.md');

/** GitHub's anchor for a heading: lower-cased, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/<[^>]+>/g, '').replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

function anchorsOf(file: string): Set<string> {
  const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, heading] of text.matchAll(/^#{1,6}\s+(.+)$/gm)) {
    const base = slug(heading!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n ? `${base}-${n}` : base);
  }
  return anchors;
}

/** Relative links of a markdown file, outside code blocks: [text](target). */
function linksOf(file: string): string[] {
  const text = readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((t) => !/^[a-z]+:/i.test(t));
}

/** Every relative link resolves to a file of the repository, and its #anchor to a heading there. */
function brokenLinks(file: string): string[] {
  const broken: string[] = [];
  for (const link of linksOf(file)) {
    const [target, anchor] = link.split('#') as [string, string | undefined];
    const resolved = target ? path.resolve(path.dirname(file), target) : file;
    if (!existsSync(resolved)) { broken.push(`${link}: no such file`); continue; }
    if (anchor && resolved.endsWith('.md') && !anchorsOf(resolved).has(anchor)) broken.push(`${link}: no such heading`);
  }
  return broken;
}

test('README.md stays under 10 KB: the pitch, the two commands, one send and where each topic lives', () => {
  const size = statSync(README).size;
  assert.ok(size < 10 * 1024, `README.md is ${size} bytes`);
  const text = readFileSync(README, 'utf8');
  assert.match(text, /npm install && npm run dev/);
  assert.match(text, /npm test/);
  assert.match(text, /curl -s http:\/\/127\.0\.0\.1:3000\/v1\/emails/);
  assert.match(text, /Benchmarks[^\n]*\]\(docs\/benchmarks\.md\)/);
  assert.doesNotMatch(text, /sends\/s/, 'benchmark tables live in docs/benchmarks.md');
});

test('every docs/ file is linked from the README, and every link of the README resolves', () => {
  const linked = new Set(linksOf(README).map((l) => l.split('#')[0]));
  for (const doc of readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md'))) {
    assert.ok(linked.has(`docs/${doc}`), `docs/${doc} is not linked from the README`);
  }
  assert.deepEqual(brokenLinks(README), []);
});

test('the links between the docs resolve', () => {
  const broken = readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md'))
    .flatMap((doc) => brokenLinks(path.join(ROOT, 'docs', doc)).map((b) => `docs/${doc}: ${b}`));
  assert.deepEqual(broken, []);
});

test('every setting the config reads is named in the README and explained in docs/settings.md', () => {
  const config = readFileSync(path.join(ROOT, 'src/platform/config.ts'), 'utf8');
  const names = [...config.matchAll(/^  ([A-Z][A-Z0-9_]+):/gm)].map((m) => m[1]!);
  assert.ok(names.length > 30, `found ${names.length} settings`);
  const readme = readFileSync(README, 'utf8');
  const settings = readFileSync(path.join(ROOT, 'docs/settings.md'), 'utf8');
  assert.deepEqual(names.filter((n) => !readme.includes(`\`${n}\``)), [], 'named in the README');
  assert.deepEqual(names.filter((n) => !new RegExp(`^\\| [^|]*\`${n}\``, 'm').test(settings)), [], 'a row of docs/settings.md');
});
