import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';
import { pauseProjects } from '../../src/reputation/queries.ts';
import { BROADCAST_MAX_AHEAD } from '../../src/broadcasts/send.task.ts';
import { seedSegment } from './fixtures.ts';

// A send that fails for a moment on a loaded machine is retried within seconds, not the default 30 s and up.
const ctx = await createTestContext({ env: { PUBLIC_BASE_URL: 'https://mail.example.test', EMAIL_RETRY_BASE_MS: '200' } });
await startTestWorker(ctx.config, ctx.sql);

test('a §19 pause holds a broadcast (no page past its window, nothing sent) and a resume continues it to the end', { timeout: 600_000 }, async () => {
  const { projectId, key } = await ctx.tenant('bc-pause');
  const n = BROADCAST_MAX_AHEAD + 200;
  const { segmentId } = await seedSegment(ctx.sql, projectId, n);
  await ctx.sql.begin((tx) => pauseProjects(tx, [projectId], 'bounce_rate'));
  const res = await ctx.call(key, '/v1/broadcasts', { method: 'POST', body: { segment_id: segmentId, from: 'a@example.test', subject: 's', text: 'x' } });
  const { id } = (await res.json()) as { id: string };
  assert.equal((await ctx.call(key, `/v1/broadcasts/${id}/send`, { method: 'POST' })).status, 200);
  await waitFor('the first pages', async () => (await ctx.sql<[{ n: number }]>`select count(*)::int as n from emails where broadcast_id = ${id}`)[0].n > 0, 60_000, 100);
  await new Promise((r) => setTimeout(r, 3000));
  const [held] = await ctx.sql<[{ made: number; sent: number }]>`
    select count(*)::int as made, count(*) filter (where status = 'sent')::int as sent from emails where broadcast_id = ${id}`;
  assert.equal(held.sent, 0, 'nothing leaves while paused');
  assert.ok(held.made <= BROADCAST_MAX_AHEAD, `no page past the window while held (${held.made})`);

  assert.equal((await ctx.call(key, '/v1/reputation/resume', { method: 'POST' })).status, 200);
  await waitFor('the broadcast to finish', async () => (await ctx.sql<[{ status: string }]>`select status from broadcasts where id = ${id}`)[0].status === 'sent', 500_000, 200)
    .catch(async (err) => {
      const rows = await ctx.sql`select status, count(*)::int as n from emails where broadcast_id = ${id} group by 1`;
      const [b] = await ctx.sql`select status, cursor, paged_at, recipients from broadcasts where id = ${id}`;
      const stuck = await ctx.sql`
        select e.id, e.last_error, e.attempt_count, j.run_at, j.attempts as job_attempts, j.last_error as job_error
        from emails e left join graphile_worker.jobs j on j.key = e.id
        where e.broadcast_id = ${id} and e.status <> 'sent' limit 10`;
      throw new Error(`${(err as Error).message}: ${JSON.stringify(rows)} ${JSON.stringify(b)} ${JSON.stringify(stuck)}`);
    });
  const [done] = await ctx.sql<[{ sent: number }]>`select count(*)::int as sent from emails where broadcast_id = ${id} and status = 'sent'`;
  assert.equal(done.sent, n);
});
