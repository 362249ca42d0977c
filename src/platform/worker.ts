import { EventEmitter } from 'node:events';
import os from 'node:os';
import { parseCronItems, run, Logger as WorkerLogger, type CronItem, type Runner, type TaskList } from 'graphile-worker';
import pg from 'pg';
import type { Sql, TxSql } from './db.ts';
import type { Logger } from './log.ts';

const HEARTBEAT_MS = 5_000;
/** A pool silent for this long is presumed dead and its jobs are released (WORKER_DEAD_AFTER_SECONDS). */
const DEAD_AFTER_SECONDS = 30;
/** How often a pool also looks through the locked jobs for pools that never wrote a heartbeat. */
const FULL_SWEEP_MS = 10 * 60_000;

export type WorkerHandle = {
  runner: Runner;
  poolId: string;
  /** Settles with the reason if graphile-worker stops taking jobs without being asked to. */
  endedOnItsOwn: Promise<unknown>;
  stop(): Promise<void>;
};

/**
 * Runs graphile-worker with a heartbeat row per pool. A pool killed without a graceful stop
 * (SIGKILL, OOM, lost host) leaves locked jobs behind; the sweep releases them once its
 * heartbeat is stale, so another replica (or this one, restarted) picks them up in seconds.
 */
export async function startWorker(opts: {
  databaseUrl: string;
  sql: Sql;
  log: Logger;
  concurrency: number;
  taskList: TaskList;
  crontab?: CronItem[];
  deadAfterSeconds?: number;
}): Promise<WorkerHandle> {
  const { sql, log } = opts;
  const deadAfterSeconds = opts.deadAfterSeconds ?? DEAD_AFTER_SECONDS;
  // Beat at least three times per dead-after window, so a live pool is never mistaken for a dead one.
  const heartbeatMs = Math.min(HEARTBEAT_MS, Math.floor((deadAfterSeconds * 1000) / 3));
  const events = new EventEmitter() as NonNullable<Parameters<typeof run>[0]['events']>;
  let poolId = '';
  events.on('pool:create', ({ workerPool }) => { poolId = workerPool.id; });

  // graphile-worker shuts its pool down by itself when a database error leaves the queue in an
  // unknown state (completions it could not record, jobs it could not give back, as when the
  // server ends its connections). Nothing takes jobs after that, so the process must not carry on
  // as if it were working. `endedOnItsOwn` settles only for an end that stop() did not ask for,
  // as soon as the shutdown starts: graphile-worker 0.18.0's can wait for good on workers whose
  // completion failed, and the process's own shutdown gives it the usual bounded time instead.
  let stopping = false;
  let runnerEnded = false;
  let runnerShuttingDown = false;
  let shutDownOnItsOwn: (reason: Error) => void = () => {};
  const shutdownStarted = new Promise<Error>((resolve) => { shutDownOnItsOwn = resolve; });
  events.on('pool:gracefulShutdown', ({ message }) => {
    runnerShuttingDown = true;
    if (!stopping) shutDownOnItsOwn(new Error(`the job runner is shutting down on its own: ${message}`));
  });

  // Our own pool, so stopping the worker also closes its connections (runner.stop() leaves a
  // pool it created open), and a dropped connection is logged rather than crashing the process.
  const pgPool = new pg.Pool({ connectionString: opts.databaseUrl, max: opts.concurrency + 2, application_name: 'mailroom-worker' });
  const lost = (err: Error) => log.warn({ err: err.message }, 'worker database connection lost');
  pgPool.on('error', lost);
  pgPool.on('connect', (client) => client.on('error', lost));
  const runner = await run({
    pgPool,
    concurrency: opts.concurrency,
    taskList: opts.taskList,
    parsedCronItems: parseCronItems(opts.crontab ?? []),
    noHandleSignals: true,
    pollInterval: 1000,
    events,
    preset: {
      worker: {
        // The pool fetches and locks a batch of due jobs in one query and hands them to its
        // workers, and completions made in the same tick are settled in one query: two round
        // trips fewer per job under load. A pool that dies with jobs in its local queue or
        // unsettled is handled like any dead pool: the sweep below releases its locks.
        localQueue: { size: Math.max(2, opts.concurrency) },
        completeJobBatchDelay: 0,
        failJobBatchDelay: 0,
      },
    },
    logger: new WorkerLogger((scope) => (level, message, meta) => {
      // A line per completed job is debug noise at production volume; failures stay visible.
      const routine = level === 'info' && message.startsWith('Completed task');
      const method = level === 'error' ? 'error' : level === 'warning' ? 'warn' : level === 'info' && !routine ? 'info' : 'debug';
      log[method]({ ...scope, ...(meta ?? {}) }, message);
    }),
  });

  // The first beat, and one every ten minutes, sweeps the locked jobs; the others only read the
  // heartbeats, so a beat costs the same whatever the backlog.
  let lastFullSweep = -Infinity;
  const beat = async () => {
    await sql`
      insert into worker_heartbeats (pool_id, hostname, pid) values (${poolId}, ${os.hostname()}, ${process.pid})
      on conflict (pool_id) do update set last_seen_at = now()`;
    if (performance.now() - lastFullSweep < FULL_SWEEP_MS) return releaseJobsOfStalePools(sql, log, deadAfterSeconds);
    await releaseJobsOfDeadPools(sql, log, deadAfterSeconds);
    lastFullSweep = performance.now();
  };
  await beat();
  let beating: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    beating = beat().catch((err) => log.warn({ err: (err as Error).message }, 'worker heartbeat failed'));
  }, heartbeatMs);

  const runnerStopped = runner.promise.then(() => undefined, (err: unknown) => err).then((err) => {
    runnerEnded = true;
    return err ?? new Error('the job runner stopped');
  });
  const endedOnItsOwn = Promise.race([shutdownStarted, runnerStopped]).then((err) => (stopping ? new Promise<never>(() => {}) : err));

  return {
    runner,
    poolId,
    endedOnItsOwn,
    async stop() {
      stopping = true;
      clearInterval(timer);
      await beating;
      // A shutdown graphile-worker started itself is waited for, not asked for a second time.
      if (!runnerEnded) await (runnerShuttingDown ? runner.promise.catch(() => {}) : runner.stop());
      await pgPool.end();
      // Marked dead rather than deleted: a runner that ended on a database error may still hold
      // jobs it could not give back, and the next sweep of any worker releases them by this row.
      await sql`update worker_heartbeats set last_seen_at = '-infinity' where pool_id = ${poolId}`.catch(() => {});
    },
  };
}

/**
 * Releases the jobs of pools whose heartbeat went stale or that stopped, and forgets those pools.
 * It reads only the heartbeat table, whose rows are the live pools and the recently gone ones, so
 * it costs the same with millions of jobs queued; a pool that died before its first heartbeat is
 * left to `releaseJobsOfDeadPools`. Two workers sweeping at once never both release one pool.
 */
export async function releaseJobsOfStalePools(sql: Sql, log: Logger, deadAfterSeconds = DEAD_AFTER_SECONDS) {
  reportReleased(log, await sql.begin((tx) => releaseStale(tx, deadAfterSeconds)));
}

async function releaseStale(tx: TxSql, deadAfterSeconds: number): Promise<string[]> {
  const gone = await tx<{ poolId: string; stopped: boolean }[]>`
    delete from worker_heartbeats where last_seen_at < now() - make_interval(secs => ${deadAfterSeconds})
    returning pool_id, last_seen_at = '-infinity' as stopped`;
  if (gone.length) await tx`select graphile_worker.force_unlock_workers(${gone.map((row) => row.poolId)}::text[])`;
  // A pool that stopped has usually given its jobs back already; only the silent ones are news.
  return gone.filter((row) => !row.stopped).map((row) => row.poolId);
}

function reportReleased(log: Logger, pools: string[]) {
  if (pools.length) log.warn({ pools }, 'released jobs of worker pools that stopped heartbeating');
}

/**
 * Releases the jobs locked by any pool without a live heartbeat, found by reading the locked
 * jobs: also those of a pool that died before its first heartbeat, or whose row is gone. Its cost
 * grows with the queue (a scan of graphile-worker's jobs table), so it runs at a pool's start and
 * every ten minutes, and `releaseJobsOfStalePools` on the other beats.
 */
export async function releaseJobsOfDeadPools(sql: Sql, log: Logger, deadAfterSeconds = DEAD_AFTER_SECONDS) {
  reportReleased(log, await sql.begin(async (tx) => {
    const stale = await releaseStale(tx, deadAfterSeconds);
    const rowless = await tx<{ lockedBy: string }[]>`
      select distinct j.locked_by from graphile_worker.jobs j
      where j.locked_by is not null
        and j.locked_at < now() - make_interval(secs => ${deadAfterSeconds})
        and not exists (
          select 1 from worker_heartbeats h
          where h.pool_id = j.locked_by and h.last_seen_at > now() - make_interval(secs => ${deadAfterSeconds}))`;
    const ids = rowless.map((d) => d.lockedBy);
    if (ids.length) await tx`select graphile_worker.force_unlock_workers(${ids}::text[])`;
    return [...stale, ...ids];
  }));
}
