import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createTestContext, TEST_SECRET_KEY } from '../helpers/app.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const ctx = await createTestContext();
const { projectId, key } = await ctx.tenant();
const dir = await mkdtemp(path.join(os.tmpdir(), 'mailroom-template-cli-'));

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('npm', ['run', '--silent', 'cli', '--', ...args], {
      cwd: ROOT,
      env: { PATH: `${path.join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`, HOME: process.env.HOME, DATABASE_URL: ctx.url, SECRET_KEY: TEST_SECRET_KEY },
    }, (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });
}

test('template create, render, update and publish from the CLI; a send then uses it', { timeout: 120_000 }, async () => {
  const html = path.join(dir, 'welcome.html');
  const text = path.join(dir, 'welcome.txt');
  await writeFile(html, '<p>Hello {{name}}</p>');
  await writeFile(text, 'Hello {{name}}');
  const made = await cli(['template', 'create', '--project', projectId, '--name', 'Welcome', '--html-file', html, '--text-file', text,
    '--subject', 'Hi {{name}}', '--alias', 'cli-welcome', '--from', 'Acme <hi@acme.example>', '--variables', '[{"key":"name","type":"string","fallback_value":"friend"}]']);
  assert.equal(made.code, 0, made.stderr);
  const t = JSON.parse(made.stdout);
  assert.match(t.id, /^tmpl_/);
  assert.equal(t.status, 'draft');
  assert.equal(t.html, '<p>Hello {{name}}</p>');
  assert.equal(made.stdout.trim().split('\n').length, 1, 'one JSON object');

  const preview = await cli(['template', 'render', t.id, '--variables', '{"name":"<Ann>"}']);
  assert.equal(preview.code, 0, preview.stderr);
  assert.deepEqual(JSON.parse(preview.stdout), { subject: 'Hi <Ann>', html: '<p>Hello &lt;Ann&gt;</p>', text: 'Hello <Ann>' });

  const published = await cli(['template', 'publish', 'cli-welcome', '--project', projectId]);
  assert.equal(published.code, 0, published.stderr);
  assert.equal(JSON.parse(published.stdout).status, 'published');

  await writeFile(html, '<p>Welcome back {{name}}</p>');
  const updated = await cli(['template', 'update', t.id, '--html-file', html]);
  assert.equal(JSON.parse(updated.stdout).has_unpublished_versions, true);
  const sent = await ctx.call(key, '/v1/emails', { method: 'POST', body: { to: 'ann@example.net', template: { id: 'cli-welcome' } } });
  const email = await (await ctx.call(key, `/v1/emails/${((await sent.json()) as { id: string }).id}`)).json() as Record<string, unknown>;
  assert.equal(email.html, '<p>Hello friend</p>', 'the unpublished edit does not reach sends');
  assert.equal(JSON.parse((await cli(['template', 'publish', t.id])).stdout).current_version, 2);
});

test('template errors are one line on stderr and exit 1', { timeout: 120_000 }, async () => {
  const html = path.join(dir, 'bad.html');
  await writeFile(html, '<p>\n{{undeclared}}</p>');
  const cases = [
    [['template', 'create', '--project', projectId, '--name', 'Bad', '--html-file', html], /html: html, line 2, column 3: "undeclared" is not declared/],
    [['template', 'create', '--project', projectId, '--name', 'Bad', '--html-file', html, '--variables', '{nope'], /--variables takes JSON/],
    [['template', 'publish', 'some-alias'], /an alias needs --project/],
  ] as const;
  // Each run starts a Node process; they are independent, so they run together.
  const outs = await Promise.all(cases.map(([args]) => cli([...args])));
  for (const [i, [args, pattern]] of cases.entries()) {
    const out = outs[i]!;
    assert.equal(out.code, 1, args.join(' '));
    assert.equal(out.stdout, '');
    assert.equal(out.stderr.trim().split('\n').length, 1, out.stderr);
    assert.match(out.stderr, pattern);
  }
});
