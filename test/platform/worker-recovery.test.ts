import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestDatabase } from '../helpers/db.ts';
import { createLogger } from '../../src/platform/log.ts';
import pg from 'pg';
import { pino } from 'pino';
import { isDatabaseAway, releaseJobsOfDeadPools, releaseJobsOfStalePools, releasingOnce, startWorker } from '../../src/platform/worker.ts';
import { createSql } from '../../src/platform/db.ts';
import { startPrivatePostgres } from '../helpers/private-pg.ts';

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

test('the sweep on each heartbeat releases the jobs of pools whose heartbeat went stale or that stopped and declares them ended, and reads no job while none did', async () => {
  await sql`delete from graphile_worker._private_jobs`;
  await sql`delete from worker_heartbeats`;
  for (const key of ['stale', 'stopped', 'live', 'rowless']) await sql`select graphile_worker.add_job('noop', '{}', job_key := ${key})`;
  await sql`update graphile_worker._private_jobs set locked_by = 'pool-' || key, locked_at = now() - interval '2 minutes'`;
  await sql`insert into worker_heartbeats (pool_id, hostname, pid, last_seen_at) values
    ('pool-stale', 'h', 1, now() - interval '31 seconds'), ('pool-live', 'h', 2, now() - interval '29 seconds'),
    -- What stop() leaves: a runner that ended on a database error may not have given its jobs back.
    ('pool-stopped', 'h', 3, '-infinity')`;

  // Reads of the jobs table, as PostgreSQL counts them once a backend has flushed its counters.
  const sweeper = createSql(url, { max: 1 });
  const jobReads = async () => {
    await sweeper`select pg_stat_force_next_flush()`;
    await new Promise((r) => setTimeout(r, 50));
    const [row] = await sql<[{ n: number }]>`
      select (select coalesce(seq_scan, 0) + coalesce(idx_scan, 0) from pg_stat_user_tables
              where relid = 'graphile_worker._private_jobs'::regclass)::int as n
      from (select pg_stat_clear_snapshot()) cleared`;
    return row.n;
  };
  try {
    await releaseJobsOfStalePools(sweeper, log, 30);
    const rows = await sql`select key, locked_by from graphile_worker.jobs order by key`;
    assert.deepEqual(rows.map((r) => [r.key, r.lockedBy]), [['live', 'pool-live'], ['rowless', 'pool-rowless'], ['stale', null], ['stopped', null]]);
    const pools = await sql`select pool_id, ended_at is not null as ended from worker_heartbeats order by pool_id`;
    assert.deepEqual(pools.map((r) => [r.poolId, r.ended]), [['pool-live', false], ['pool-stale', true], ['pool-stopped', true]],
      'the stale and the stopped pools are declared ended, so their leases are free at once');

    const before = await jobReads();
    await releaseJobsOfStalePools(sweeper, log, 30);
    assert.equal(await jobReads(), before, 'with no stale pool the sweep does not touch the jobs');
    await releaseJobsOfDeadPools(sweeper, log, 30);
    assert.ok(await jobReads() > before, 'the full sweep reads the jobs (so the counter above would have seen it)');
    const [rowless] = await sql`select locked_by from graphile_worker.jobs where key = 'rowless'`;
    assert.equal(rowless!.lockedBy, null, 'the full sweep releases a pool that never wrote a heartbeat');
  } finally {
    await sweeper.end();
  }
});

test('a job runner that graphile-worker stops by itself is started again in-process; one stopped by stop() is not', async () => {
  const ran: string[] = [];
  const start = () => startWorker({ databaseUrl: url, sql, log, concurrency: 1, taskList: { note: async (p) => { ran.push((p as { n: string }).n); } }, deadAfterSeconds: 30 });

  const asked = await start();
  await asked.stop();
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(asked.restarts, 0);
  // A stopped pool is left marked ended, for the next sweep to release what it may still hold.
  const [mark] = await sql<[{ stopped: boolean }]>`
    select last_seen_at = '-infinity' and ended_at is not null as stopped from worker_heartbeats where pool_id = ${asked.poolId}`;
  assert.equal(mark?.stopped, true);

  // graphile-worker ends its runner by itself on a database error it cannot recover from.
  const dropped = await start();
  try {
    const first = dropped.runner;
    await first.stop();
    await waitUntil(() => dropped.restarts === 1, 5000);
    assert.notEqual(dropped.runner, first, 'a new runner');
    await sql`select graphile_worker.add_job('note', '{"n":"after"}')`;
    await waitUntil(() => ran.includes('after'), 5000);
    const [old] = await sql<[{ ended: boolean }]>`select ended_at is not null as ended from worker_heartbeats where pool_id = ${dropped.poolId}`;
    assert.equal(old?.ended, true, 'the old pool is declared ended, its jobs released');
  } finally {
    await dropped.stop();
  }
});

test('a runner shut down by itself while a job keeps it from finishing is replaced at once, and the job left to end', async () => {
  // graphile-worker 0.18.0's own shutdown can wait for good on a worker whose completion failed;
  // a job that does not end holds it the same way.
  let jobStarted!: () => void;
  let letJobEnd!: () => void;
  const started = new Promise<void>((resolve) => { jobStarted = resolve; });
  const ended = new Promise<void>((resolve) => { letJobEnd = resolve; });
  const ran: string[] = [];
  const handle = await startWorker({
    // Two workers: the held job is released with the old pool and runs again on the new runner too.
    databaseUrl: url, sql, log, concurrency: 2, deadAfterSeconds: 30,
    taskList: { hold: async () => { jobStarted(); await ended; }, note: async (p) => { ran.push((p as { n: string }).n); } },
  });
  try {
    await sql`select graphile_worker.add_job('hold', '{}')`;
    await started;
    void handle.runner.stop(); // as graphile-worker does by itself after a database error
    await waitUntil(() => handle.restarts === 1, 3000);
    await sql`select graphile_worker.add_job('note', '{"n":"meanwhile"}')`;
    await waitUntil(() => ran.includes('meanwhile'), 5000).catch(async (e) => {
      throw new Error(`${e.message}: ${JSON.stringify(await sql`select task_identifier, locked_by, run_at, attempts, last_error from graphile_worker.jobs`)} pools ${JSON.stringify(await sql`select * from worker_heartbeats`)} first ${handle.poolId}`);
    });
  } finally {
    letJobEnd();
    await handle.stop();
  }
});

test('a runner whose pool graphile-worker shut down by itself has its cron stopped once replaced, while its held job goes on', async () => {
  // A pool shutting down by itself leaves the runner's cron running; replaced, that cron would
  // meet the refusing pool at every minute and log an error each time, for the life of the process.
  let jobStarted!: () => void;
  let letJobEnd!: () => void;
  const started = new Promise<void>((resolve) => { jobStarted = resolve; });
  const ended = new Promise<void>((resolve) => { letJobEnd = resolve; });
  const lines: Array<{ msg: string; level: number }> = [];
  const captured = pino({ level: 'debug' }, { write: (line: string) => { lines.push(JSON.parse(line)); } });
  const handle = await startWorker({
    databaseUrl: url, sql, log: captured, concurrency: 1, deadAfterSeconds: 30,
    crontab: [{ task: 'note', match: '0 0 1 1 *', identifier: 'yearly', options: { backfillPeriod: 0 }, payload: {} }],
    taskList: { hold: async () => { jobStarted(); await ended; }, note: async () => {} },
  });
  const exitCode = process.exitCode;
  try {
    await sql`select graphile_worker.add_job('hold', '{}')`;
    await started;
    // The pool listens on a connection of its own, which may still be connecting: a notice sent
    // before its LISTEN would be lost.
    await waitUntil(async () => (await sql`
      select 1 from pg_stat_activity where datname = current_database() and query like 'LISTEN "jobs:insert"; LISTEN "worker:migrate";%'`).length > 0, 15_000);
    // One of the ways graphile-worker shuts a pool down by itself, as it does after a database
    // error: a breaking schema change announced. Its runner and cron are left to the caller.
    await sql`select pg_notify('worker:migrate', '{"breaking":true}')`;
    await waitUntil(() => handle.restarts === 1, 15_000);
    await waitUntil(() => lines.some((l) => l.msg.startsWith('Runner stopping')), 10_000);
    assert.deepEqual(lines.filter((l) => l.level >= 50).map((l) => l.msg), [], 'nothing logged as an error');
  } finally {
    process.exitCode = exitCode; // graphile-worker sets 57 for a breaking migration
    letJobEnd();
    await handle.stop();
  }
});

test('a job released with a replaced runner and keyed again by its task, still running there, is not deleted by that runner\'s completion', async () => {
  // As a send does when it hands its email back to the queue: the same job key, added again from
  // the task. With the job released (unlocked) that reuses its row, which the old runner's
  // completion deletes by id, and the email would be left queued with no job.
  let jobStarted!: () => void;
  let letJobEnd!: () => void;
  const started = new Promise<void>((resolve) => { jobStarted = resolve; });
  const ended = new Promise<void>((resolve) => { letJobEnd = resolve; });
  const handle = await startWorker({
    databaseUrl: url, sql, log, concurrency: 1, deadAfterSeconds: 30,
    // The released job is kept out of the new runner's reach, so the old runner's task is the one
    // that keys it again; released jobs are those whose locks the replacement ends.
    beforeFetching: async (db) => { await db.query(`update graphile_worker._private_jobs set run_at = now() + interval '1 hour' where key = 'again'`); },
    taskList: {
      requeueing: async () => {
        jobStarted();
        await ended;
        await sql`select graphile_worker.add_job('requeueing', '{"n":2}', job_key := 'again', run_at := now() + interval '1 hour')`;
      },
    },
  });
  const old = handle.runner;
  try {
    await sql`select graphile_worker.add_job('requeueing', '{"n":1}', job_key := 'again')`;
    await started;
    void old.stop(); // as graphile-worker does by itself after a database error
    await waitUntil(() => handle.restarts === 1, 3000);
    const [released] = await sql<[{ lockedBy: string | null }]>`select locked_by from graphile_worker.jobs where key = 'again'`;
    assert.equal(released.lockedBy, null, 'the replacement released the job');
    letJobEnd();
    // The old runner finishes its shutdown once its task has ended and its completion was tried.
    await Promise.race([old.promise.catch(() => {}), new Promise((r) => setTimeout(r, 3000))]);
    await new Promise((r) => setTimeout(r, 200));
    const jobs = await sql<{ payload: { n: number } }[]>`select payload from graphile_worker._private_jobs where key = 'again'`;
    assert.deepEqual(jobs.map((j) => j.payload.n), [2], 'the job the task added is there');
  } finally {
    letJobEnd();
    await handle.stop();
  }
});

test('a runner whose first lookup of its task ids meets a connection the server ends, and so fails every fetch after it, is replaced and the jobs run', async () => {
  const ran: string[] = [];
  // The lookup's INSERT waits on this lock, and its connection is ended while it waits.
  const locker = await sql.reserve();
  await locker`begin`;
  await locker`lock table graphile_worker._private_tasks in access exclusive mode`;
  let locked = true;
  const starting = startWorker({ databaseUrl: url, sql, log, concurrency: 1, deadAfterSeconds: 30, taskList: { noted: async (p) => { ran.push((p as { n: string }).n); } } });
  let handle: Awaited<typeof starting> | undefined;
  try {
    await waitUntil(async () => (await sql`
      select pg_terminate_backend(pid) from pg_stat_activity
      where datname = current_database() and application_name = 'mailroom-worker' and wait_event_type = 'Lock' and query like '%_private_tasks%'`).length === 1, 10_000);
    await locker`rollback`;
    locked = false;
    handle = await starting;
    const first = handle.runner;
    await sql`select graphile_worker.add_job('noted', '{"n":"after"}')`;
    // Three failed fetches a second apart, then a new runner.
    await waitUntil(() => ran.includes('after'), 10_000);
    assert.equal(handle.restarts, 1);
    assert.notEqual(handle.runner, first, 'a new runner ran the job');
  } finally {
    if (locked) await locker`rollback`.catch(() => {});
    locker.release();
    await (handle ?? await starting).stop();
  }
});

test('a worker pool client released twice is let go once, in both forms of connect, and queries still work', async () => {
  let seconds = 0;
  const pool = releasingOnce(new pg.Pool({ connectionString: url, max: 2 }), () => { seconds++; });
  // What pg-pool does without the guard: the second release throws.
  const bare = new pg.Pool({ connectionString: url, max: 1 });
  try {
    const client = await bare.connect();
    client.release();
    assert.throws(() => client.release(), /already been released/);

    const promised = await pool.connect();
    promised.release();
    promised.release();
    // The form graphile-worker's LISTEN client comes by, with its release as the third argument.
    await new Promise<void>((resolve, reject) => pool.connect((err, called, done) => {
      if (err || !called) return reject(err);
      done();
      done();
      called.release();
      resolve();
    }));
    assert.equal(seconds, 3);
    const { rows } = await pool.query('select 1 as one');
    assert.equal(rows[0].one, 1);
    assert.equal(pool.totalCount - pool.idleCount, 0, 'no client is left checked out');
  } finally {
    await pool.end();
    await bare.end();
  }
});

test('a worker that starts while its database restarts waits for it and then runs jobs; one the database refuses fails at once', async () => {
  const server = await startPrivatePostgres();
  const privateUrl = await server.createDatabase('mailroom');
  const privateSql = createSql(privateUrl, { max: 2 });
  const ran: string[] = [];
  let handle: Awaited<ReturnType<typeof startWorker>> | undefined;
  try {
    await server.stop();
    const starting = startWorker({ databaseUrl: privateUrl, sql: privateSql, log, concurrency: 1, deadAfterSeconds: 30, taskList: { noted: async (p) => { ran.push((p as { n: string }).n); } } });
    let settled = false;
    void starting.then(() => { settled = true; }, () => { settled = true; });
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(settled, false, 'the start waits while the database is away');
    await server.start();
    handle = await starting;
    await privateSql`select graphile_worker.add_job('noted', '{"n":"after"}')`;
    await waitUntil(() => ran.includes('after'), 10_000);

    await assert.rejects(
      startWorker({ databaseUrl: server.urlFor('no_such_database'), sql: privateSql, log, concurrency: 1, taskList: { noted: async () => {} } }),
      (err: Error) => !isDatabaseAway(err) && /does not exist/.test(err.message),
    );
  } finally {
    await handle?.stop();
    await privateSql.end({ timeout: 1 });
  }
});

test('errors of a database that is away are told from errors of one that refuses', () => {
  for (const code of ['ECONNREFUSED', 'ECONNRESET', '57P01', '57P03', '08006']) assert.equal(isDatabaseAway({ code }), true, code);
  assert.equal(isDatabaseAway(new Error('Connection terminated unexpectedly')), true);
  assert.equal(isDatabaseAway(new Error('timeout exceeded when trying to connect')), true);
  for (const code of ['28P01', '3D000', '42P01']) assert.equal(isDatabaseAway({ code }), false, code);
  assert.equal(isDatabaseAway(undefined), false);
});

test('after an outage, a worker declares no other pool ended until it has itself beaten for the whole dead-after window', async () => {
  await sql`delete from worker_heartbeats`;
  // Another pool's row went stale while the database was away; that pool is alive and about to beat.
  await sql`insert into worker_heartbeats (pool_id, hostname, pid, last_seen_at) values ('pool-other', 'h', 9, now() - interval '10 seconds')`;
  const handle = await startWorker({ databaseUrl: url, sql, log, concurrency: 1, taskList: {}, deadAfterSeconds: 3 });
  try {
    await new Promise((r) => setTimeout(r, 1500));
    const [early] = await sql<[{ ended: boolean }]>`select ended_at is not null as ended from worker_heartbeats where pool_id = 'pool-other'`;
    assert.equal(early?.ended, false, 'not judged by a worker that was away itself');
    await waitUntil(async () => (await sql`select 1 from worker_heartbeats where pool_id = 'pool-other' and ended_at is not null`).length === 1, 8000);
  } finally {
    await handle.stop();
  }
});

async function waitUntil(check: () => boolean | Promise<boolean>, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
