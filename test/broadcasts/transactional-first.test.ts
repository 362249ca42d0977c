import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';
import { createLogger } from '../../src/platform/log.ts';
import { broadcastSendTask, BROADCAST_MAX_AHEAD } from '../../src/broadcasts/send.task.ts';
import { seedSegment } from './fixtures.ts';
import { warmMimePool } from '../helpers/hostile.ts';
import { emailSendTask } from '../../src/emails/send.task.ts';
import { BROADCAST_SEND_PRIORITY } from '../../src/emails/queries.ts';

const ctx = await createTestContext({ env: { PUBLIC_BASE_URL: 'https://mail.example.test', WORKER_CONCURRENCY: '4' } });

test('a broadcast copy whose job runs again while another attempt holds it keeps its place behind transactional mail', async () => {
  const { projectId, key } = await ctx.tenant('bc-again');
  const { segmentId } = await seedSegment(ctx.sql, projectId, 3);
  const res = await ctx.call(key, '/v1/broadcasts', { method: 'POST', body: { segment_id: segmentId, from: 'a@example.test', subject: 's', text: 'x' } });
  const { id } = (await res.json()) as { id: string };
  assert.equal((await ctx.call(key, `/v1/broadcasts/${id}/send`, { method: 'POST' })).status, 200);
  const deps = { config: ctx.config, sql: ctx.sql, log: createLogger('silent') };
  await broadcastSendTask(deps)({ broadcast_id: id, project_id: projectId }, undefined as never);
  const sent = await ctx.call(key, '/v1/emails', { method: 'POST', body: { from: 'a@example.test', to: 'reset@example.test', subject: 'Reset', text: 'x' } });
  const transactional = ((await sent.json()) as { id: string }).id;
  const [copy] = await ctx.sql<[{ id: string }]>`select id from emails where broadcast_id = ${id} and project_id = ${projectId} limit 1`;
  // No worker runs yet. Each held by a live attempt elsewhere: the job looks again when that lease ends.
  await ctx.sql`update emails set status = 'sending', lease_owner = 'elsewhere/1', lease_expires_at = now() + interval '1 minute'
    where id in (${copy.id}, ${transactional}) and project_id = ${projectId}`;
  for (const emailId of [copy.id, transactional]) await emailSendTask(deps)({ email_id: emailId, project_id: projectId }, undefined as never);
  const jobs = await ctx.sql<{ key: string; priority: number; runAt: Date }[]>`
    select key, priority, run_at from graphile_worker.jobs where key in (${copy.id}, ${transactional})`;
  const priority = Object.fromEntries(jobs.map((j) => [j.key, j.priority]));
  assert.equal(priority[copy.id], BROADCAST_SEND_PRIORITY, 'the copy is enqueued again at the broadcast priority');
  assert.equal(priority[transactional], 0, 'transactional mail at its own');
  assert.ok(jobs.every((j) => j.runAt.getTime() > Date.now() + 30_000), 'both wait for the lease to end');
});

test('transactional mail accepted behind a queued broadcast page reaches the provider first', { timeout: 180_000 }, async () => {
  const { projectId, key } = await ctx.tenant('bc-first');
  const { segmentId } = await seedSegment(ctx.sql, projectId, 600);
  const res = await ctx.call(key, '/v1/broadcasts', { method: 'POST', body: { segment_id: segmentId, from: 'a@example.test', subject: 's', text: 'x' } });
  const { id } = (await res.json()) as { id: string };
  assert.equal((await ctx.call(key, `/v1/broadcasts/${id}/send`, { method: 'POST' })).status, 200);
  // One page made before any worker runs: 500 broadcast emails wait in the queue, and no more.
  const task = broadcastSendTask({ config: ctx.config, sql: ctx.sql, log: createLogger('silent') });
  await task({ broadcast_id: id, project_id: projectId }, undefined as never);
  await task({ broadcast_id: id, project_id: projectId }, undefined as never);
  const [queued] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from emails where broadcast_id = ${id}`;
  assert.ok(queued.n > 0 && queued.n <= BROADCAST_MAX_AHEAD, `a bounded window is queued ahead (${queued.n})`);

  const transactional: string[] = [];
  for (let i = 0; i < 3; i++) {
    const sent = await ctx.call(key, '/v1/emails', { method: 'POST', body: { from: 'a@example.test', to: `reset${i}@example.test`, subject: 'Reset', text: 'x' } });
    transactional.push(((await sent.json()) as { id: string }).id);
  }
  // The sink answers once its parse thread has read the message: threads already started, so a
  // cold thread's first parse does not reorder what the worker handed over.
  await warmMimePool();
  await startTestWorker(ctx.config, ctx.sql);
  await waitFor('the broadcast to be sent', async () => {
    const [b] = await ctx.sql<[{ status: string }]>`select status from broadcasts where id = ${id}`;
    return b.status === 'sent';
  }, 150_000, 200);
  const order = await ctx.sql<{ id: string }[]>`select id from emails where project_id = ${projectId} order by sent_at, id`;
  const positions = transactional.map((t) => order.findIndex((o) => o.id === t));
  // Claims go by priority, so the worker hands the transactional mail over among its first sends.
  // The order the sink finishes them in is not the order they were handed over (its parse threads
  // take them as they come free), so the bound leaves room for that; without priority they would
  // come after the 500 broadcast emails queued before them.
  assert.ok(positions.every((p) => p >= 0 && p < 50), `transactional sent first (positions ${positions})`);
  const [total] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from emails where broadcast_id = ${id} and status = 'sent'`;
  assert.equal(total.n, 600);
});
