import { EventEmitter } from 'node:events';
import os from 'node:os';
import { parseCronItems, run, Logger as WorkerLogger, type CronItem, type Runner, type TaskList } from 'graphile-worker';
import pg from 'pg';
import type { Sql } from './db.ts';
import type { Logger } from './log.ts';

const HEARTBEAT_MS = 5_000;
/** A pool silent for this long is presumed dead and its jobs are released (WORKER_DEAD_AFTER_SECONDS). */
const DEAD_AFTER_SECONDS = 30;

/** Waits before starting a new job runner after one stopped on its own: doubling, at most a minute. */
const RESTART_DELAYS_MS = [1_000, 2_000, 4_000, 8_000, 15_000, 30_000, 60_000];

export type WorkerHandle = {
  /** The job runner taking jobs now; a new one replaces it after a restart. */
  readonly runner: Runner;
  readonly poolId: string;
  /** Job runners started in place of one that stopped, or stalled, on its own. */
  readonly restarts: number;
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
  // A healthy pool fetches at least every poll interval when idle, and starts or ends jobs when busy.
  let progressAt = Date.now();
  const progressed = () => { progressAt = Date.now(); };
  events.on('localQueue:getJobs:complete', progressed);
  events.on('job:start', progressed);
  events.on('job:complete', progressed);

  // Our own pool, so stopping the worker also closes its connections (runner.stop() leaves a
  // pool it created open), and a dropped connection is logged rather than crashing the process.
  const pgPool = new pg.Pool({ connectionString: opts.databaseUrl, max: opts.concurrency + 2, application_name: 'mailroom-worker' });
  const lost = (err: Error) => log.warn({ err: err.message }, 'worker database connection lost');
  pgPool.on('error', lost);
  pgPool.on('connect', (client) => client.on('error', lost));
  const startRunner = () => run({
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

  let runner = await startRunner();
  let restarts = 0;

  const beat = async () => {
    await sql`
      insert into worker_heartbeats (pool_id, hostname, pid) values (${poolId}, ${os.hostname()}, ${process.pid})
      on conflict (pool_id) do update set last_seen_at = now()`;
    await releaseJobsOfDeadPools(sql, log, deadAfterSeconds);
  };
  await beat();
  let beating: Promise<void> = Promise.resolve();
  /** Since when heartbeats have gone through without a failure: the database has answered. */
  let answeringSince = Date.now();
  const timer = setInterval(() => {
    beating = beat()
      .then(() => replaceIfStalled())
      .catch((err) => {
        answeringSince = Number.POSITIVE_INFINITY;
        log.warn({ err: (err as Error).message }, 'worker heartbeat failed');
      });
  }, heartbeatMs);

  // graphile-worker shuts its pool down by itself when a database error leaves the queue in an
  // unknown state (completions it could not record, jobs it could not give back, as when the
  // server ends its connections). Nothing would take jobs after that, so a new pool starts once
  // the database answers. The stopped pool's heartbeat goes stale, and the sweep releases the
  // jobs it still held, as for any dead pool.
  let stopping = false;
  /** The runner taking jobs; none while one is being started in place of another. */
  let active: Runner | undefined = runner;
  let restarting: Promise<void> | undefined;
  let wakeRestart: (() => void) | undefined;
  const pause = (ms: number) => new Promise<void>((resolve) => {
    if (stopping) return resolve();
    const delay = setTimeout(resolve, ms);
    wakeRestart = () => { clearTimeout(delay); resolve(); };
  });
  const restart = async () => {
    for (let attempt = 0; !stopping; attempt++) {
      await pause(RESTART_DELAYS_MS[Math.min(attempt, RESTART_DELAYS_MS.length - 1)]!);
      if (stopping) return;
      try {
        runner = await startRunner();
      } catch (startErr) {
        log.warn({ err: (startErr as Error).message, attempt: attempt + 1 }, 'the job runner could not start again yet');
        continue;
      }
      active = runner;
      progressAt = Date.now();
      restarts++;
      log.info({ pool: poolId, restarts }, 'job runner started again');
      beating = beating.then(beat).catch((beatErr) => log.warn({ err: (beatErr as Error).message }, 'worker heartbeat failed'));
      watch(runner);
      return;
    }
  };
  const watch = (current: Runner) => {
    void current.promise.then(() => new Error('the job runner stopped'), (err: unknown) => err).then((err) => {
      if (stopping || current !== active) return;
      active = undefined;
      log.error({ err: err instanceof Error ? err.message : err, pool: poolId }, 'the job runner stopped on its own after a database error; starting a new one');
      restarting = restart();
    });
  };
  watch(runner);

  // graphile-worker's pool can also stay up yet take nothing more after a database error: no
  // fetch, no job started or ended. Once that has lasted twice the dead-after window, with the
  // database answering all along and jobs due, the pool is stopped in the background (whatever
  // it waits on may never answer) and replaced. A pool gets that long to recover by itself
  // after an outage.
  const stalledAfterMs = deadAfterSeconds * 2000;
  const replaceIfStalled = async () => {
    if (answeringSince === Number.POSITIVE_INFINITY) answeringSince = Date.now();
    const stalled = active;
    if (stopping || !stalled || Date.now() - Math.max(progressAt, answeringSince) < stalledAfterMs) return;
    if (!(await jobsWaiting(sql, Object.keys(opts.taskList), stalledAfterMs / 1000))) return;
    if (stopping || stalled !== active) return;
    active = undefined;
    log.error({ pool: poolId, stalledForMs: Date.now() - progressAt }, 'the job runner has taken no jobs while jobs are due; starting a new one');
    void stalled.stop().catch(() => {});
    restarting = restart();
  };

  return {
    get runner() { return runner; },
    get poolId() { return poolId; },
    get restarts() { return restarts; },
    async stop() {
      stopping = true;
      wakeRestart?.();
      clearInterval(timer);
      await beating;
      // A runner that started while stop() was waiting is stopped below like any other.
      await restarting;
      if (active) await active.stop();
      await pgPool.end();
      await sql`delete from worker_heartbeats where pool_id = ${poolId}`.catch(() => {});
    },
  };
}

/** Whether jobs of these tasks have been due and unlocked for the given seconds at least. */
async function jobsWaiting(sql: Sql, tasks: string[], seconds: number): Promise<boolean> {
  const [row] = await sql<[{ waiting: boolean }]>`
    select exists (
      select 1 from graphile_worker.jobs
      where locked_at is null and attempts < max_attempts and task_identifier = any(${tasks})
        and run_at <= now() - make_interval(secs => ${seconds})) as waiting`;
  return row.waiting;
}

export async function releaseJobsOfDeadPools(sql: Sql, log: Logger, deadAfterSeconds = DEAD_AFTER_SECONDS) {
  const released = await sql.begin(async (tx) => {
    const dead = await tx<{ lockedBy: string }[]>`
      select distinct j.locked_by from graphile_worker.jobs j
      where j.locked_by is not null
        and j.locked_at < now() - make_interval(secs => ${deadAfterSeconds})
        and not exists (
          select 1 from worker_heartbeats h
          where h.pool_id = j.locked_by and h.last_seen_at > now() - make_interval(secs => ${deadAfterSeconds}))`;
    const ids = dead.map((d) => d.lockedBy);
    if (ids.length) await tx`select graphile_worker.force_unlock_workers(${ids}::text[])`;
    await tx`delete from worker_heartbeats where last_seen_at < now() - make_interval(secs => ${deadAfterSeconds * 10})`;
    return ids;
  });
  if (released.length) log.warn({ pools: released }, 'released jobs of worker pools that stopped heartbeating');
}
