import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createTestContext, TEST_SECRET_KEY } from '../helpers/app.ts';
import { spawnEntry } from '../helpers/process.ts';
import { testRedisUrl } from '../helpers/redis.ts';

// §22.12: an email's day is the database's day. An API host whose clock is 10 days behind (Debian
// `faketime`'s libfaketime under the process) files its mail under today's partition.
const LIBFAKETIME = ['/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1', '/usr/lib/faketime/libfaketime.so.1'].find((p) => existsSync(p));
const REDIS_URL = (await testRedisUrl()) ?? 'redis://127.0.0.1:6379';
const DAY_MS = 86_400_000;

test('an API whose clock is 10 days behind accepts every send (201) and files it under the database\'s today', {
  skip: LIBFAKETIME ? false : 'libfaketime is not installed (Debian package faketime): the skewed clock cannot be made',
  timeout: 120_000,
}, async () => {
  const ctx = await createTestContext();
  const t = await ctx.tenant('skewed');
  const api = spawnEntry('src/api.ts', {
    DATABASE_URL: ctx.url, REDIS_URL, SECRET_KEY: TEST_SECRET_KEY, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info',
    LD_PRELOAD: LIBFAKETIME!, FAKETIME: '-10d', FAKETIME_DONT_FAKE_MONOTONIC: '1',
  });
  try {
    const listening = (await api.logLine('api listening', 60_000)) as { url: string; time: string };
    // The process's own clock really is 10 days behind (each log line is stamped with its Date).
    const behind = Date.now() - Date.parse(listening.time);
    assert.ok(behind > 9.9 * DAY_MS && behind < 10.1 * DAY_MS, `the API's clock is ${behind} ms behind`);

    const [{ today }] = await ctx.sql<[{ today: string }]>`select to_char(now() at time zone 'UTC', 'YYYYMMDD') as today`;
    const send = (path: string, body: unknown) => fetch(`${listening.url}${path}`, {
      method: 'POST', headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
    });
    const one = await send('/v1/emails', { from: 'app@example.com', to: 'ann@example.net', subject: 'Skewed', text: 'x' });
    assert.equal(one.status, 201, await one.clone().text());
    const batch = await send('/v1/emails/batch', [1, 2, 3].map((i) => ({ from: 'app@example.com', to: `b${i}@example.net`, subject: `Skewed ${i}`, text: 'x' })));
    assert.equal(batch.status, 201, await batch.clone().text());
    const ids = [((await one.json()) as { id: string }).id, ...((await batch.json()) as { data: { id: string }[] }).data.map((e) => e.id)];

    const rows = await ctx.sql<{ id: string; partition: string; status: string }[]>`
      select id, tableoid::regclass::text as partition, status from emails where project_id = ${t.projectId} order by id`;
    assert.deepEqual(rows.map((r) => r.id).sort(), [...ids].sort());
    for (const r of rows) {
      assert.equal(r.partition, `emails_p${today}`, `${r.id} is filed under the database's today`);
      assert.equal(r.status, 'queued');
    }
    // Its read answers too, and the email lists.
    const read = await fetch(`${listening.url}/v1/emails/${ids[0]}`, { headers: { authorization: `Bearer ${t.key}` } });
    assert.equal(read.status, 200);
    const list = await fetch(`${listening.url}/v1/emails?limit=10`, { headers: { authorization: `Bearer ${t.key}` } });
    assert.equal(((await list.json()) as { data: unknown[] }).data.length, 4);
    api.child.kill('SIGTERM');
    assert.equal(await api.exited, 0);
  } finally {
    if (api.child.exitCode === null) api.child.kill('SIGKILL');
    await ctx.sql.end({ timeout: 1 });
  }
});
