import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { createEndpoint } from '../../src/webhooks/service.ts';
import { FLUSH_KEY_PREFIX } from '../../src/webhooks/queries.ts';
import { emitEvent, fakeDns } from './helpers.ts';

// An event's deliveries queue their endpoint's flush only when none is waiting and due: add_jobs
// notifies every worker, which then looks for jobs, so a burst of events to one endpoint would
// otherwise cost a look per event. No worker runs here: the jobs stay as the events leave them.
const ctx = await createTestContext({ env: { WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8' } });
const dns = fakeDns({ 'hooks.test': ['127.0.0.1'] });

type FlushJob = { id: string; key: string | null; revision: number; due: boolean; lockedAt: Date | null };

test('a flush waiting and due is left as it is; one waiting for later is made due; a running one gets a successor', async () => {
  const { projectId } = await ctx.tenant();
  const { endpoint } = await createEndpoint(ctx.sql, ctx.config, projectId, 'https://hooks.test/flush-jobs', { resolve: dns.resolve });
  const key = FLUSH_KEY_PREFIX + endpoint.id;
  const jobs = () => ctx.sql<FlushJob[]>`
    select id::text, key, revision, run_at <= now() as due, locked_at from graphile_worker._private_jobs
    where key = ${key} or (key is null and payload->>'endpoint_id' = ${endpoint.id}) order by id`;

  await emitEvent(ctx.sql, projectId);
  const [first] = await jobs();
  assert.ok(first && first.key === key && first.due, 'the first event queues a flush');
  assert.equal(first.revision, 0);

  await emitEvent(ctx.sql, projectId);
  await emitEvent(ctx.sql, projectId);
  assert.deepEqual([...await jobs()], [first], 'the waiting flush takes the next events as it is: add_jobs was not called');

  await ctx.sql`update graphile_worker._private_jobs set run_at = now() + interval '1 hour' where id = ${first.id}`;
  await emitEvent(ctx.sql, projectId);
  const [later] = await jobs();
  assert.equal(later!.id, first.id);
  assert.ok(later!.due, 'a flush waiting for later is made due by a new delivery');

  await ctx.sql`update graphile_worker._private_jobs set locked_at = now(), locked_by = 'a-worker' where id = ${first.id}`;
  await emitEvent(ctx.sql, projectId);
  const [running, next] = await jobs();
  assert.equal(running!.id, first.id);
  assert.equal(running!.key, null, 'the running flush gives its key up');
  assert.ok(next && next.key === key && next.due && next.lockedAt === null, 'and a flush to come is queued');
});
