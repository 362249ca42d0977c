import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { testRedisUrl, REDIS_SKIP_REASON } from '../helpers/redis.ts';
import { waitFor } from '../helpers/wait.ts';
import { sinkWorkerEnv, startWorkerProcess, stopProcess } from '../helpers/worker-process.ts';
import { seedSegment } from './fixtures.ts';

const redisUrl = await testRedisUrl();
const ctx = await createTestContext({ env: { PUBLIC_BASE_URL: 'https://mail.example.test' } });

// Enough that five workers, each killed a few dozen sends after it starts, all die mid-broadcast.
const RECIPIENTS = Number(process.env.BROADCAST_CRASH_RECIPIENTS ?? 5000);
const KILLS = 5;

test('worker SIGKILLs during a broadcast lose no recipient; a second copy only of a send in flight, same Message-ID, never a third', { skip: redisUrl ? false : REDIS_SKIP_REASON, timeout: 900_000 }, async (tc) => {
  const { projectId, key } = await ctx.tenant('bc-crash');
  const { segmentId } = await seedSegment(ctx.sql, projectId, RECIPIENTS);
  const res = await ctx.call(key, '/v1/broadcasts', { method: 'POST', body: { segment_id: segmentId, from: 'a@example.test', subject: 'Hi {{{FIRST_NAME|there}}}', text: 'x' } });
  const { id } = (await res.json()) as { id: string };
  assert.equal((await ctx.call(key, `/v1/broadcasts/${id}/send`, { method: 'POST' })).status, 200);

  // The sink keeps every copy: at its default of 5000 messages a project, second copies would push out first ones.
  const env = { ...await sinkWorkerEnv(ctx.url, redisUrl!), SINK_MAX_MESSAGES: '100000' };
  const caught = async () => (await ctx.sql<[{ n: number }]>`select count(*)::int as n from sink_messages where project_id = ${projectId}`)[0].n;
  for (let k = 0; k < KILLS; k++) {
    const worker = startWorkerProcess(env);
    const before = await caught();
    // Killed once it has sent something of its own, mid-broadcast.
    await waitFor('the worker to send', async () => (await caught()) > before + 20, 120_000, 20);
    await stopProcess(worker, 'SIGKILL');
  }
  const last = startWorkerProcess(env);
  await waitFor('the broadcast to be sent', async () => {
    const [b] = await ctx.sql<[{ status: string }]>`select status from broadcasts where id = ${id}`;
    return b.status === 'sent';
  }, 600_000, 200);
  await stopProcess(last);

  const [r] = await ctx.sql<[{ n: number; distinct: number }]>`
    select count(*)::int as n, count(distinct contact_id)::int as distinct from broadcast_recipients where broadcast_id = ${id}`;
  assert.equal(r.n, RECIPIENTS, 'every member is a recipient');
  assert.equal(r.distinct, RECIPIENTS);
  const [e] = await ctx.sql<[{ n: number; sent: number }]>`
    select count(*)::int as n, count(*) filter (where status = 'sent')::int as sent from emails where broadcast_id = ${id}`;
  assert.equal(e.n, RECIPIENTS, 'one email per recipient, never a second');
  assert.equal(e.sent, RECIPIENTS);
  const copies = await ctx.sql<{ to: string; n: number; ids: number }[]>`
    select to_addresses[1] as to, count(*)::int as n,
      count(distinct substring(convert_from(raw, 'UTF8') from 'Message-ID: (<[^>]+>)'))::int as ids
    from sink_messages where project_id = ${projectId} group by 1`;
  assert.equal(copies.length, RECIPIENTS, 'no recipient lost');
  const twice = copies.filter((c) => c.n > 1);
  assert.ok(copies.every((c) => c.n <= 2), 'never a third copy');
  assert.ok(twice.every((c) => c.ids === 1), 'a second copy carries the same Message-ID');
  tc.diagnostic(`${RECIPIENTS} recipients, ${KILLS} SIGKILLs: ${copies.length} received a copy, ${twice.length} a second, none a third`);
  assert.ok(twice.length <= KILLS * 4, `at most WORKER_CONCURRENCY second copies per crash (${twice.length})`);
});
