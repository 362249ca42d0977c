import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { testRedisUrl, REDIS_SKIP_REASON } from '../helpers/redis.ts';
import { waitFor } from '../helpers/wait.ts';
import { sinkWorkerEnv, startWorkerProcess, stopProcess } from '../helpers/worker-process.ts';
import { generatedCsv, getImportBody, seedProject, upload } from './imports-fixtures.ts';

const redisUrl = await testRedisUrl();
const ctx = await createTestContext();

const state = async (id: string) => {
  const [row] = await ctx.sql<[{ status: string; total: number; bytesDone: number }]>`select status, total, bytes_done::float8 as bytes_done from contact_imports where id = ${id}`;
  return row;
};

test('a worker killed with SIGKILL mid-import: the next one continues from the cursor, counts exact, no contact twice', { skip: redisUrl ? false : REDIS_SKIP_REASON, timeout: 170_000 }, async () => {
  const { projectId, key } = await ctx.tenant('crash');
  const { segmentId } = await seedProject(ctx.sql, projectId);
  const rows = 60_000;
  // Every 1000th row repeats an earlier address, in another case: an update, across batches.
  const csv = generatedCsv(rows).split('\n').map((line, i) => (i > 0 && i % 1000 === 0 ? line.replace(/^person\d+/, `PERSON${i - 500}`) : line)).join('\n');
  const res = await upload(ctx, key, csv, { segments: JSON.stringify([segmentId]) });
  assert.equal(res.status, 202);
  const { id } = await res.json() as { id: string };

  const env = await sinkWorkerEnv(ctx.url, redisUrl!);
  const first = startWorkerProcess(env);
  const atKill = await waitFor('the import part-way', async () => {
    const s = await state(id);
    return s.status === 'in_progress' && s.total >= 10_000 ? s : undefined;
  }, 90_000, 10);
  await stopProcess(first, 'SIGKILL');
  const afterKill = await state(id);
  assert.ok(afterKill.total < rows, `the kill landed mid-import (${JSON.stringify(afterKill)})`);
  assert.ok(afterKill.total >= atKill.total);

  const second = startWorkerProcess(env);
  await waitFor('the import to complete after the restart', async () => (await state(id)).status === 'completed', 120_000, 100);
  await stopProcess(second);

  const done = await getImportBody(ctx, key, id);
  const repeats = rows / 1000;
  assert.deepEqual(done.counts, { total: rows, created: rows - repeats, updated: repeats, skipped: 0, failed: 0 });
  const [c] = await ctx.sql<[{ n: number; distinctEmails: number; members: number }]>`
    select count(*)::int as n, count(distinct lower(email))::int as distinct_emails,
      (select count(*)::int from contact_segments where segment_id = ${segmentId}) as members
    from contacts where project_id = ${projectId}`;
  assert.deepEqual(c, { n: rows - repeats, distinctEmails: rows - repeats, members: rows - repeats });
  const [left] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from graphile_worker.jobs where task_identifier = 'contacts_import__run'`;
  assert.equal(left.n, 0);
});
