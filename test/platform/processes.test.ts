import { test } from 'node:test';
import assert from 'node:assert/strict';
import postgres from 'postgres';
import { createServer } from 'node:net';
import { createTestDatabase } from '../helpers/db.ts';
import { COMMITTED_MIGRATIONS, ROOT, spawnBuilt, spawnEntry } from '../helpers/process.ts';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { createProject } from '../../src/projects/service.ts';
import { createApiKey } from '../../src/keys/service.ts';
import { TEST_SECRET_KEY } from '../helpers/app.ts';
import { testRedisUrl } from '../helpers/redis.ts';

const REDIS_URL = (await testRedisUrl()) ?? 'redis://127.0.0.1:6379';
const env = (databaseUrl: string, extra: Record<string, string> = {}) => ({
  DATABASE_URL: databaseUrl, REDIS_URL, SECRET_KEY: TEST_SECRET_KEY, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', SINK_SMTP_PORT: '0', METRICS_PORT: '0', ...extra,
});

test('npm start: serves, then SIGTERM drains and exits 0', async () => {
  const { url } = await createTestDatabase();
  const p = spawnEntry('src/main.ts', env(url));
  const { url: base } = (await p.logLine('api listening')) as { url: string };
  await p.logLine('worker running');
  assert.deepEqual(await (await fetch(`${base}/healthz`)).json(), { status: 'ok' });
  const ready = await (await fetch(`${base}/readyz`)).json();
  assert.equal(ready.dependencies.database, true);
  const [beat] = await postgres(url, { max: 1 })`select count(*)::int as n from worker_heartbeats`;
  assert.equal(beat!.n, 3, 'both job runners (sends and webhooks) and the process\'s lease holder heartbeat');
  p.child.kill('SIGTERM');
  assert.equal(await p.exited, 0);
  assert.match(p.stdout(), /"msg":"stopped"/);
});

test('the two processes run split: start:api serves, start:worker works the queue', async () => {
  const { url } = await createTestDatabase();
  const api = spawnEntry('src/api.ts', env(url));
  const worker = spawnEntry('src/worker.ts', env(url));
  const { url: base } = (await api.logLine('api listening')) as { url: string };
  await worker.logLine('worker running');
  assert.equal((await fetch(`${base}/healthz`)).status, 200);
  // The worker says so at start when the server would let its plans and queue table degrade.
  const [setting] = await postgres(url, { max: 1 })<[{ autovacuum: string }]>`select current_setting('autovacuum') as autovacuum`;
  // Logged before 'worker running', so by now it is there or never will be.
  if (setting.autovacuum === 'on') assert.doesNotMatch(worker.stdout(), /autovacuum off/);
  else assert.match(worker.stdout(), /PostgreSQL runs with autovacuum off/);
  assert.doesNotMatch(worker.stdout(), /api listening/, 'the worker serves no HTTP');
  api.child.kill('SIGTERM');
  worker.child.kill('SIGTERM');
  assert.deepEqual(await Promise.all([api.exited, worker.exited]), [0, 0]);
});

test('MIGRATE_ON_START=yes: two replicas starting together on an empty database both come up', async () => {
  const { url, sql } = await createTestDatabase({ empty: true });
  const a = spawnEntry('src/main.ts', env(url, { MIGRATE_ON_START: 'yes' }));
  const b = spawnEntry('src/api.ts', env(url, { MIGRATE_ON_START: 'YES' }));
  const [la, lb] = await Promise.all([a.logLine('migrations applied', 30_000), b.logLine('migrations applied', 30_000)]);
  assert.equal(Number(la.applied) + Number(lb.applied), COMMITTED_MIGRATIONS, 'each migration ran exactly once');
  await Promise.all([a.logLine('api listening'), b.logLine('api listening')]);
  const [{ n }] = await sql`select count(*)::int as n from graphile_migrate.migrations` as unknown as [{ n: number }];
  assert.equal(n, COMMITTED_MIGRATIONS);
  const views = await sql`select table_name from information_schema.views where table_schema = 'ops' order by 1`;
  assert.deepEqual(views.map((v) => v.tableName), ['domains', 'email_pipeline', 'providers', 'queue', 'reputation', 'retention', 'stuck', 'webhook_health']);
  a.child.kill('SIGTERM');
  b.child.kill('SIGTERM');
  await Promise.all([a.exited, b.exited]);
});

test('a failed migration stops the process with one clear line', async () => {
  const { url, sql } = await createTestDatabase({ empty: true });
  await sql`create table projects (conflicting int)`;
  const p = spawnEntry('src/main.ts', env(url, { MIGRATE_ON_START: 'on' }));
  assert.equal(await p.exited, 1);
  assert.match(p.stderr(), /^mailroom: migration failed: /m);
  assert.doesNotMatch(p.stdout(), /api listening/);
});

test('a taken sink port stops the worker with one line naming SINK_SMTP_PORT, and nothing talks to that port', async () => {
  const { url } = await createTestDatabase();
  let connections = 0;
  const squatter = createServer((socket) => { connections++; socket.destroy(); });
  await new Promise<void>((r) => squatter.listen(0, '127.0.0.1', r));
  const port = (squatter.address() as { port: number }).port;
  try {
    const worker = spawnEntry('src/worker.ts', env(url, { SINK_SMTP_PORT: String(port), SINK_SMTP_HOST: '127.0.0.1' }));
    assert.equal(await worker.exited, 1);
    const lines = worker.stderr().trim().split('\n');
    assert.equal(lines.length, 1, worker.stderr());
    assert.match(lines[0]!, /^mailroom: SINK_SMTP_PORT: 127\.0\.0\.1:\d+ is already in use/);
    assert.doesNotMatch(worker.stderr(), /\n\s+at /, 'no stack trace');
    assert.equal(connections, 0, 'the worker never connected to the other program');
  } finally {
    await new Promise((r) => squatter.close(r));
  }
});

test('the built bundle: each role is one Node process on dist/, the API carries no worker modules, and mail flows', async () => {
  const build = spawnSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, PATH: `${path.join(ROOT, 'node_modules/.bin')}:${process.env.PATH}` } });
  assert.equal(build.status, 0, build.stderr);
  const { url, sql } = await createTestDatabase();
  const project = await createProject(sql, 'built');
  const key = await createApiKey(sql, project.id, 'built');
  const api = spawnBuilt('dist/api.js', env(url), ['--max-semi-space-size=4', '--heap-growing-percent=50']);
  const worker = spawnBuilt('dist/worker.js', env(url));
  const { url: base } = (await api.logLine('api listening')) as { url: string };
  await worker.logLine('worker running');
  for (const p of [api, worker]) {
    const pid = p.child.pid!;
    assert.match(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' '), /node .*dist\/(api|worker)\.js/);
    const children = readdirSync(`/proc/${pid}/task`).flatMap((t) => readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim().split(/\s+/).filter(Boolean));
    assert.deepEqual(children, [], 'no child processes');
  }
  // The API's bundle reaches the worker-only packages only through dynamic imports it never takes.
  const apiChunks = new Set<string>();
  const walk = (file: string) => {
    if (apiChunks.has(file)) return;
    apiChunks.add(file);
    // dist/api.js names the current build under dist/.b/; chunks import each other by ./name.
    for (const m of readFileSync(path.join(ROOT, 'dist', file), 'utf8').matchAll(/^import (?:[^'"]*? from )?"\.\/([^"]+)";?$/gm)) walk(path.posix.join(path.posix.dirname(file), m[1]!));
  };
  walk('api.js');
  const staticCode = [...apiChunks].map((f) => readFileSync(path.join(ROOT, 'dist', f), 'utf8')).join('\n');
  for (const pkg of ['graphile-worker', 'graphile-migrate', 'smtp-server', 'mailparser', '@aws-sdk/client-sesv2', '@aws-sdk/client-sqs', 'undici', 'nodemailer/lib/mail-composer']) {
    assert.doesNotMatch(staticCode, new RegExp(`^import [^;]*from "${pkg}"`, 'm'), `${pkg} is loaded lazily`);
  }
  const rssMb = Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${api.child.pid}/status`, 'utf8'))![1]) / 1024;
  console.log(`# built API: RSS after boot ${rssMb.toFixed(1)} MiB`);

  const sent = await fetch(`${base}/v1/emails`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ from: 'a@example.com', to: 'b@example.net', subject: 'Built', text: 'From the bundle' }),
  });
  assert.equal(sent.status, 201);
  const { id } = (await sent.json()) as { id: string };
  const deadline = Date.now() + 20_000;
  while ((await sql`select 1 from emails where id = ${id} and status = 'sent'`).length === 0) {
    assert.ok(Date.now() < deadline, 'the email was not sent by the built worker');
    await new Promise((r) => setTimeout(r, 100));
  }
  // The list reads through the API's pool that keeps generic plans (AppDeps.historySql).
  const listed = await fetch(`${base}/v1/emails?limit=5`, { headers: { authorization: `Bearer ${key.key}` } });
  assert.deepEqual(((await listed.json()) as { data: Array<{ id: string }> }).data.map((e) => e.id), [id]);
  const history = await sql<{ query: string }[]>`select query from pg_stat_activity where datname = current_database() and application_name = 'mailroom-api-history'`;
  assert.ok(history.some((c) => /from emails/.test(c.query)), 'the list ran on the history pool');
  api.child.kill('SIGTERM');
  worker.child.kill('SIGTERM');
  assert.deepEqual(await Promise.all([api.exited, worker.exited]), [0, 0]);
});

test('every production start, npm script and image alike, runs with two malloc arenas', () => {
  const scripts = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts as Record<string, string>;
  for (const name of ['start', 'start:api', 'start:worker']) assert.match(scripts[name]!, /^MALLOC_ARENA_MAX=2 node /, name);
  assert.match(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'), /^ENV .*\bMALLOC_ARENA_MAX=2\b/m);
});
