import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestDatabase } from '../helpers/db.ts';
import { createLogger } from '../../src/platform/log.ts';
import { releaseJobsOfDeadPools, startWorker } from '../../src/platform/worker.ts';

const { sql, url } = await createTestDatabase();
const log = createLogger('silent');

test('jobs locked by a pool that stopped heartbeating are released; live pools keep theirs', async () => {
  await sql`select graphile_worker.add_job('noop', '{}', job_key := 'dead')`;
  await sql`select graphile_worker.add_job('noop', '{}', job_key := 'alive')`;
  await sql`update graphile_worker._private_jobs set locked_by = 'pool-dead', locked_at = now() - interval '2 minutes' where key = 'dead'`;
  await sql`update graphile_worker._private_jobs set locked_by = 'pool-alive', locked_at = now() - interval '2 minutes' where key = 'alive'`;
  await sql`insert into worker_heartbeats (pool_id, hostname, pid) values ('pool-alive', 'h', 1)`;
  await releaseJobsOfDeadPools(sql, log);
  const rows = await sql`select key, locked_by from graphile_worker.jobs order by key`;
  assert.deepEqual(rows.map((r) => [r.key, r.lockedBy]), [['alive', 'pool-alive'], ['dead', null]]);
});

test('a job runner that stops without being asked is reported; one stopped by stop() is not', async () => {
  const start = () => startWorker({ databaseUrl: url, sql, log, concurrency: 1, taskList: {}, deadAfterSeconds: 30 });

  const asked = await start();
  let reported = false;
  void asked.endedOnItsOwn.then(() => { reported = true; });
  await asked.stop();
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(reported, false);

  // graphile-worker ends its runner by itself on a database error it cannot recover from.
  const dropped = await start();
  await dropped.runner.stop();
  assert.ok(await dropped.endedOnItsOwn);
  await dropped.stop();
});
