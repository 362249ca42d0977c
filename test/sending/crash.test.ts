import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { testRedisUrl, REDIS_SKIP_REASON } from '../helpers/redis.ts';
import { waitFor } from '../helpers/wait.ts';
import { insertEmail } from './fixtures.ts';
import { sinkWorkerEnv, startWorkerProcess, stopProcess } from '../helpers/worker-process.ts';

const redisUrl = await testRedisUrl();
const ctx = await createTestContext();

const countBy = async (projectId: string) => {
  const rows = await ctx.sql<{ status: string; n: number }[]>`
    select status, count(*)::int as n from emails where project_id = ${projectId} group by status`;
  return Object.fromEntries(rows.map((r) => [r.status, r.n])) as Record<string, number>;
};

test('a worker killed with SIGKILL mid-batch loses nothing: after a restart every email is sent', { skip: redisUrl ? false : REDIS_SKIP_REASON, timeout: 90_000 }, async () => {
  const { projectId } = await ctx.tenant('crash');
  const total = 40;
  const ids: string[] = [];
  for (let i = 0; i < total; i++) ids.push(await insertEmail(ctx.sql, projectId, { subject: `Batch ${i}` }));

  const env = await sinkWorkerEnv(ctx.url, redisUrl!);
  const first = startWorkerProcess(env);
  await waitFor('the first worker to start sending', async () => ((await countBy(projectId)).sent ?? 0) >= 3, 30_000, 10);
  await stopProcess(first, 'SIGKILL');
  const atCrash = await countBy(projectId);
  assert.ok((atCrash.sent ?? 0) < total, `the kill landed mid-batch (${JSON.stringify(atCrash)})`);

  const second = startWorkerProcess(env);
  await waitFor('every email to be sent after the restart', async () => (await countBy(projectId)).sent === total, 45_000, 100);
  await stopProcess(second);

  // Each email has exactly one `sent` transition; a message cut off mid-SMTP may be caught twice (at least once).
  const events = await ctx.sql<{ emailId: string; n: number }[]>`
    select email_id, count(*)::int as n from events
    where project_id = ${projectId} and type = 'email.sent' group by email_id`;
  assert.equal(events.length, total);
  assert.ok(events.every((e) => e.n === 1));
  const [caught] = await ctx.sql<[{ n: number }]>`
    select count(distinct email_id)::int as n from sink_messages where project_id = ${projectId}`;
  assert.equal(caught.n, total, 'the sink caught every email');
  const [left] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from graphile_worker.jobs where task_identifier = 'email__send'`;
  assert.equal(left.n, 0, 'no email__send job is left behind');
});
