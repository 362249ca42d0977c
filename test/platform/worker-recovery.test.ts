import { test } from 'node:test';
import assert from 'node:assert/strict';
import { adminUrl, createTestDatabase } from '../helpers/db.ts';
import { createLogger } from '../../src/platform/log.ts';
import { releaseJobsOfDeadPools, startWorker } from '../../src/platform/worker.ts';
import { waitFor } from '../helpers/wait.ts';
import { pino } from 'pino';
import postgres from 'postgres';

const { sql, url, name } = await createTestDatabase();
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
  // The later tests start their own pools; nothing of this one is left for their sweeps.
  await sql`delete from graphile_worker._private_jobs`;
  await sql`delete from worker_heartbeats`;
});

/** A logger that keeps each line's message, for the tests that wait on what the worker said. */
function recordingLogger() {
  const messages: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => { messages.push(JSON.parse(line).msg); } });
  return { logger, messages };
}

/** A worker whose one task, `ping`, records each payload's `n`; and what it logged. */
async function pingWorker(deadAfterSeconds: number) {
  const { logger, messages } = recordingLogger();
  const pinged: number[] = [];
  const worker = await startWorker({
    databaseUrl: url, sql, log: logger, concurrency: 1, deadAfterSeconds,
    taskList: { ping: async (payload) => { pinged.push((payload as { n: number }).n); } },
  });
  return { worker, messages, pinged };
}

test('a job runner that graphile-worker stops on its own is replaced by a new pool that takes jobs; stop() replaces nothing', { timeout: 60_000 }, async () => {
  const { worker, messages, pinged } = await pingWorker(30);
  try {
    const first = { runner: worker.runner, poolId: worker.poolId };
    // What graphile-worker does by itself after a database error it cannot recover from.
    await first.runner.stop();
    await waitFor('a new job runner', () => worker.restarts === 1, 10_000);
    assert.notEqual(worker.poolId, first.poolId);
    assert.notEqual(worker.runner, first.runner);
    assert.ok(messages.includes('the job runner stopped on its own after a database error; starting a new one'));

    await sql`select graphile_worker.add_job('ping', '{"n": 1}')`;
    await waitFor('the new pool to run a job', () => pinged.includes(1), 10_000);
    const [beat] = await sql<[{ n: number }]>`select count(*)::int as n from worker_heartbeats where pool_id = ${worker.poolId}`;
    assert.equal(beat.n, 1, 'the new pool heartbeats under its own id');
  } finally {
    await worker.stop();
  }
  await new Promise((r) => setTimeout(r, 1_500));
  assert.equal(worker.restarts, 1, 'a runner stopped by stop() is not replaced');
});

test('a job runner that cannot start again while the database refuses connections keeps trying, and starts once it accepts them', { timeout: 60_000 }, async () => {
  const { logger, messages } = recordingLogger();
  const worker = await startWorker({ databaseUrl: url, sql, log: logger, concurrency: 1, taskList: {}, deadAfterSeconds: 30 });
  const admin = postgres(adminUrl(), { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`alter database "${name}" allow_connections false`);
    await admin`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${name} and application_name = 'mailroom-worker'`;
    await worker.runner.stop().catch(() => {});
    await waitFor('a failed start', () => messages.includes('the job runner could not start again yet'), 15_000);
    assert.equal(worker.restarts, 0);

    await admin.unsafe(`alter database "${name}" allow_connections true`);
    await waitFor('the job runner to start again', () => worker.restarts === 1, 30_000);
  } finally {
    await admin.unsafe(`alter database "${name}" allow_connections true`);
    await admin.end();
    await worker.stop();
  }
});

test('a job runner that stays up but takes no jobs while jobs are due is replaced', { timeout: 60_000 }, async () => {
  const { worker, messages, pinged } = await pingWorker(2);
  let release!: () => void;
  const released = new Promise<void>((resolve) => { release = resolve; });
  let locking: Promise<unknown> | undefined;
  try {
    const first = worker.poolId;
    await sql`select graphile_worker.add_job('ping', '{"n": 2}', run_at := now() + interval '1 second')`;
    // Every fetch now waits for this lock, as a pool wedged after a database error takes nothing.
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => { locked = resolve; });
    locking = sql.begin(async (tx) => {
      await tx`lock table graphile_worker._private_jobs in exclusive mode`;
      locked();
      await released;
    });
    await isLocked;
    await waitFor('the stall to be noticed', () => messages.includes('the job runner has taken no jobs while jobs are due; starting a new one'), 20_000);
    assert.equal(pinged.length, 0, 'the job was not run while fetches waited');

    // The new runner's own start may wait for the lock as well.
    release();
    await locking;
    await waitFor('a new job runner', () => worker.restarts === 1, 20_000);
    assert.notEqual(worker.poolId, first);
    await waitFor('the job to run', () => pinged.includes(2), 10_000);
  } finally {
    release();
    await locking;
    await worker.stop();
  }
});
