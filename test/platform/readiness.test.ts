import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestDatabase } from '../helpers/db.ts';
import { runCli, spawnEntry } from '../helpers/process.ts';
import { TEST_SECRET_KEY } from '../helpers/app.ts';
import { testRedisUrl } from '../helpers/redis.ts';

// §18.12: readiness tells the truth.
const REDIS_URL = (await testRedisUrl()) ?? 'redis://127.0.0.1:6379';
const env = (databaseUrl: string) => ({
  DATABASE_URL: databaseUrl, REDIS_URL, SECRET_KEY: TEST_SECRET_KEY, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', SINK_SMTP_PORT: '0', METRICS_PORT: '0',
});
const WAITING = 'database schema is behind this build';

test('against an unmigrated database /readyz answers 503 with database false, and the worker waits saying what to run; both go on once migrated', async () => {
  const { url } = await createTestDatabase({ empty: true });
  const api = spawnEntry('src/api.ts', env(url));
  const worker = spawnEntry('src/worker.ts', env(url));
  const { url: base } = (await api.logLine('api listening')) as { url: string };
  const res = await fetch(`${base}/readyz`);
  assert.equal(res.status, 503);
  const body = (await res.json()) as { status: string; dependencies: { database: boolean; cache: boolean } };
  assert.deepEqual(body, { status: 'not_ready', dependencies: { database: false, cache: true } });

  // One line every 10 s, naming what to run, and the process stays up.
  const started = Date.now();
  await worker.logLine(`${WAITING} (migrations pending): run \`npm run --silent cli -- migrate\`, or start with MIGRATE_ON_START=1; waiting`);
  await new Promise((r) => setTimeout(r, 10_800 - (Date.now() - started)));
  assert.equal(worker.child.exitCode, null, `the worker exited: ${worker.stderr()}`);
  const waits = worker.stdout().split('\n').filter((l) => l.includes(WAITING));
  assert.equal(waits.length, 2, worker.stdout());
  for (const line of waits) assert.match(JSON.parse(line).msg, /cli -- migrate/);
  assert.equal(worker.stderr(), '', 'no stack trace');

  const migrate = await runCli(['migrate'], { DATABASE_URL: url, SECRET_KEY: TEST_SECRET_KEY, LOG_LEVEL: 'silent' });
  assert.equal(migrate.code, 0, migrate.stderr);
  await worker.logLine('worker running', 20_000);
  const ready = await fetch(`${base}/readyz`);
  assert.equal(ready.status, 200);
  assert.equal(((await ready.json()) as { dependencies: { database: boolean } }).dependencies.database, true);
  for (const p of [api, worker]) p.child.kill('SIGTERM');
  assert.deepEqual(await Promise.all([api.exited, worker.exited]), [0, 0]);
});
