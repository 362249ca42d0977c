import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { createTestContext, TEST_SECRET_KEY } from '../helpers/app.ts';
import { ROOT, spawnEntry } from '../helpers/process.ts';
import { browser, OWNER } from './client.ts';
import { pino } from 'pino';
import { startPrivatePostgres } from '../helpers/private-pg.ts';
import { createSql } from '../../src/platform/db.ts';
import { logOwnerSetup } from '../../dashboard/setup.ts';
import type { Config } from '../../src/platform/config.ts';

const owners = async (sql: Awaited<ReturnType<typeof createTestContext>>['sql']) =>
  (await sql<{ n: number }[]>`select count(*)::int as n from members`)[0]!.n;

test('production: sign-up without the setup link is 403; the API logs the link at start, and it works', async () => {
  const ctx = await createTestContext();
  for (const q of ['', '?token=', '?token=forged-token-value']) {
    assert.equal((await ctx.app.request(`/dashboard/signup${q}`)).status, 403, `GET ${q}`);
  }
  // A form with a valid CSRF token (from the real link's page) but a forged or missing setup token.
  const thief = browser(ctx);
  await thief.get('/dashboard/signup');
  for (const token of ['', 'forged-token-value']) {
    const res = await thief.post(`/dashboard/signup?token=${token}`, { email: 'thief@example.com', password: 'a long enough password', token });
    assert.equal(res.res.status, 403, `POST token=${token}`);
    assert.match(res.text, /setup link/i);
  }
  assert.equal(await owners(ctx.sql), 0);

  const api = spawnEntry('src/api.ts', {
    DATABASE_URL: ctx.url, SECRET_KEY: TEST_SECRET_KEY, REDIS_URL: process.env.REDIS_URL || 'redis://127.0.0.1:6379',
    PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', PUBLIC_BASE_URL: 'https://mail.example.test',
  });
  const { url } = (await api.logLine('api listening')) as { url: string };
  const line = await api.logLine('owner setup');
  const setupUrl = String(line.setup_url);
  assert.match(setupUrl, /^https:\/\/mail\.example\.test\/dashboard\/signup\?token=[A-Za-z0-9_-]{43}$/);
  assert.equal(api.stdout().split('\n').filter((l) => l.includes('"msg":"owner setup"')).length, 1);
  const link = new URL(setupUrl);
  const page = await fetch(`${url}${link.pathname}${link.search}`);
  assert.equal(page.status, 200);
  assert.match(await page.text(), new RegExp(`name="token" value="${link.searchParams.get('token')}"`));
  assert.equal((await fetch(`${url}/dashboard/signup`)).status, 403);
  api.child.kill('SIGTERM');
  await api.exited;

  // The client follows the same link (test/dashboard/client.ts) and signs up.
  const b = browser(ctx);
  await b.get('/dashboard/signup');
  assert.equal((await b.post('/dashboard/signup', OWNER)).res.status, 303);
  assert.equal(await owners(ctx.sql), 1);
});

test('an API that starts while its database restarts still logs the setup link, once the database answers', async () => {
  const server = await startPrivatePostgres();
  const url = await server.createDatabase('mailroom');
  const sql = createSql(url, { max: 2 });
  const lines: Array<{ msg: string }> = [];
  const log = pino({ level: 'info' }, { write: (line: string) => { lines.push(JSON.parse(line)); } });
  try {
    await server.stop();
    // Resolves at once, whatever the database does: the API's start never waits on it.
    await logOwnerSetup(sql, { development: false, secretKey: TEST_SECRET_KEY } as Config, log, 'http://127.0.0.1:3000');
    assert.deepEqual(lines.map((l) => l.msg), ['could not look for an owner yet; trying again each second']);
    await server.start();
    const deadline = Date.now() + 10_000;
    while (!lines.some((l) => l.msg === 'owner setup') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.equal(lines.filter((l) => l.msg === 'owner setup').length, 1);
    assert.equal(lines.filter((l) => l.msg.startsWith('could not look')).length, 1, 'the wait is said once');
  } finally {
    await sql.end({ timeout: 1 });
  }
});

test('development needs no setup link', async () => {
  const ctx = await createTestContext({ env: { NODE_ENV: 'development' } });
  assert.equal((await ctx.app.request('/dashboard/signup')).status, 200);
});

test('the email field is at most 254 characters on sign-in and sign-up', async () => {
  const ctx = await createTestContext();
  const long = `${'a'.repeat(243)}@example.com`; // 255
  const b = browser(ctx);
  await b.get('/dashboard/signup');
  const signup = await b.post('/dashboard/signup', { email: long, password: OWNER.password });
  assert.equal(signup.res.status, 422);
  assert.match(signup.text, /at most 254 characters/);
  assert.equal(await owners(ctx.sql), 0);
  assert.equal((await b.post('/dashboard/signup', { email: long.slice(1), password: OWNER.password })).res.status, 303, '254 is accepted');
  const c = browser(ctx);
  await c.get('/dashboard/login');
  const login = await c.post('/dashboard/login', { email: `x${'a'.repeat(5000)}@example.com`, password: OWNER.password });
  assert.equal(login.res.status, 422);
  assert.match(login.text, /at most 254 characters/);
  assert.match(login.text, /maxlength="254"/);
});

/** `npm run --silent cli -- …` with `input` on standard input. */
function cli(args: string[], env: Record<string, string>, input: string) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(path.join(ROOT, 'node_modules/.bin/tsx'), [path.join(ROOT, 'src/cli.ts'), ...args], {
      cwd: ROOT, env: { PATH: `${path.join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`, HOME: process.env.HOME ?? '/root', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

test('cli owner create reads the password from stdin, prints {id, email}, and the owner signs in', async () => {
  const ctx = await createTestContext();
  const env = { DATABASE_URL: ctx.url, SECRET_KEY: TEST_SECRET_KEY };
  const made = await cli(['owner', 'create', '--email', 'Boss@Example.com'], env, 'a password from stdin\n');
  assert.equal(made.code, 0, made.stderr);
  const json = JSON.parse(made.stdout) as { id: string; email: string };
  assert.deepEqual(Object.keys(json), ['id', 'email']);
  assert.match(json.id, /^usr_/);
  assert.equal(json.email, 'boss@example.com');
  const b = browser(ctx);
  await b.get('/dashboard/login');
  assert.equal((await b.post('/dashboard/login', { email: 'boss@example.com', password: 'a password from stdin' })).res.status, 303);

  const again = await cli(['owner', 'create', '--email', 'second@example.com'], env, 'another long password\n');
  assert.equal(again.code, 1);
  assert.match(again.stderr, /^mailroom: This instance already has an owner/);
  assert.equal(await owners(ctx.sql), 1);
});
