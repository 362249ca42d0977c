import { EventEmitter } from 'node:events';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseCronItems, run, Logger as WorkerLogger, type CronItem, type Runner, type TaskList } from 'graphile-worker';
import pg from 'pg';
import type { Sql, TxSql } from './db.ts';
import type { Logger } from './log.ts';
import { REPLACED_RUNNER_REFUSAL } from './shutdown.ts';

const HEARTBEAT_MS = 5_000;
/** A pool silent for this long is presumed dead and its jobs are released (WORKER_DEAD_AFTER_SECONDS). */
const DEAD_AFTER_SECONDS = 30;
/** How often a pool also looks through the locked jobs for pools that never wrote a heartbeat. */
const FULL_SWEEP_MS = 10 * 60_000;

/** How soon a runner that graphile-worker shut down is started again, while the database is away. */
const RESTART_RETRY_MS = [100, 250, 500];
/** Bounds on graphile-worker's connections: to connect, and for any one query's answer. */
const CONNECT_TIMEOUT_MS = 5_000;
const QUERY_TIMEOUT_MS = 10_000;
/** A new runner that has not started within this is abandoned and another one tried. */
const START_TIMEOUT_MS = 5_000;
/** The heartbeat naming a new runner's pool, written right after it starts, waits no longer than this. */
const BEAT_TIMEOUT_MS = 2_000;
/**
 * Job fetches failing in a row after which a runner is replaced. graphile-worker 0.18.0 looks up
 * its task ids once per runner and keeps the answer, a failed one too: a runner whose first lookup
 * met a connection the server was ending fails every fetch after it, and never runs a job again.
 */
const FETCH_FAILURES_BEFORE_REPLACING = 3;
/** How long the first runner's start waits for a database that is restarting or failing over. */
const FIRST_START_PATIENCE_MS = 60_000;

export type WorkerHandle = {
  /** The job runner now; a new one after each restart. */
  readonly runner: Runner;
  /** The pool id of the first runner (each restart has its own). */
  poolId: string;
  /** How many times the runner was started again after graphile-worker shut it down by itself. */
  readonly restarts: number;
  stop(): Promise<void>;
};

/**
 * Runs graphile-worker with a heartbeat row per pool, and one for the lease holder the process's
 * email leases name (`holderId`). A pool killed without a graceful stop (SIGKILL, OOM, lost host)
 * leaves locked jobs behind; the sweep declares it ended once its heartbeat is stale, and
 * releases its jobs, so another replica (or this one, restarted) picks them up in seconds.
 *
 * graphile-worker shuts its runner down by itself when a database error leaves the queue in an
 * unknown state (completions it could not record, as when the server restarts). The process
 * stays up through that: the runner is started again in-process once the database answers, and
 * what the process holds in memory (accepted sends yet to be recorded, leases given up late) is
 * kept. The old runner's jobs are released to run again; their emails are guarded by their leases.
 */
export async function startWorker(opts: {
  databaseUrl: string;
  sql: Sql;
  log: Logger;
  concurrency: number;
  taskList: TaskList;
  crontab?: CronItem[];
  deadAfterSeconds?: number;
  holderId?: string;
  /**
   * Run on a fresh connection each time a runner is replaced, before the old runner's jobs are
   * released and before the new one fetches anything: the holder re-asserts its leases there.
   */
  beforeFetching?: (db: pg.Pool) => Promise<unknown>;
}): Promise<WorkerHandle> {
  const { sql, log } = opts;
  const deadAfterSeconds = opts.deadAfterSeconds ?? DEAD_AFTER_SECONDS;
  // Beat at least three times per dead-after window, so a live pool is never mistaken for a dead one.
  const heartbeatMs = Math.min(HEARTBEAT_MS, Math.floor((deadAfterSeconds * 1000) / 3));
  let stopping = false;
  let restarts = 0;

  // Each runner gets a pool of its own, so stopping the worker also closes its connections
  // (runner.stop() leaves a pool it created open), a new runner never inherits connections the
  // server ended, and a dropped connection is logged rather than crashing the process.
  const newPgPool = (replaced: () => boolean = () => false) => {
    // Every wait on the server is bounded: a connection within 5 s, a query's answer within 10 s
    // (graphile-worker's are all short), so a connection the server ended without a word fails
    // the query instead of leaving a fetch or a completion, and with it the runner, waiting.
    const pool = new pg.Pool({
      connectionString: opts.databaseUrl, max: opts.concurrency + 2, application_name: 'mailroom-worker',
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS, query_timeout: QUERY_TIMEOUT_MS, keepAlive: true,
    });
    const lost = (err: Error) => log.warn({ err: err.message }, 'worker database connection lost');
    pool.on('error', lost);
    pool.on('connect', (client) => client.on('error', lost));
    return refusingOnceReplaced(releasingOnce(pool, () => log.debug('a pool client was released a second time; ignored')), replaced);
  };

  type Current = { runner: Runner; pgPool: pg.Pool; poolId: string; shuttingDown: boolean; ended: boolean; replaced: boolean; fetchFailures: number };
  const startRunner = async (): Promise<Current> => {
    const events = new EventEmitter() as NonNullable<Parameters<typeof run>[0]['events']>;
    const current = { runner: undefined as unknown as Runner, poolId: '', shuttingDown: false, ended: false, replaced: false, fetchFailures: 0 } as Current;
    const pgPool = current.pgPool = newPgPool(() => current.replaced);
    events.on('pool:create', ({ workerPool }) => { current.poolId = workerPool.id; });
    events.on('localQueue:getJobs:complete', () => { current.fetchFailures = 0; });
    events.on('pool:gracefulShutdown', ({ message }) => {
      current.shuttingDown = true;
      if (!stopping) void restart(current, message);
    });
    // A start that fails (the server went away again) leaves nothing behind: its pool is closed.
    current.runner = await run({
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
        // Fetches failing in a row: while the database is away that is expected (the new runner
        // waits for it), after it is back it means this runner can no longer fetch at all.
        if (message.startsWith('Error occurred fetching jobs') && ++current.fetchFailures >= FETCH_FAILURES_BEFORE_REPLACING && !stopping && !current.shuttingDown) {
          void restart(current, `${current.fetchFailures} job fetches in a row failed`);
        }
        // A line per completed job is debug noise at production volume; failures stay visible. A
        // replaced runner asked to stop while its pool already shuts down says so as an error.
        const routine = (level === 'info' && message.startsWith('Completed task'))
          || (current.replaced && message.startsWith('gracefulShutdown called when gracefulShutdown is already in progress'));
        const method = routine ? 'debug' : level === 'error' ? 'error' : level === 'warning' ? 'warn' : level === 'info' ? 'info' : 'debug';
        log[method]({ ...scope, ...(meta ?? {}) }, message);
      }),
    }).catch(async (err: unknown) => {
      await pgPool.end().catch(() => {});
      throw err;
    });
    void current.runner.promise.then(() => undefined, () => undefined).then(() => {
      current.ended = true;
      if (!stopping && !current.shuttingDown) void restart(current, 'the job runner stopped');
    });
    return current;
  };

  // Declared before the first runner starts: its events may ask for a restart while it starts.
  let current!: Current;
  let restarting: Promise<void> | undefined;
  // A database restarting as the worker starts is waited out, as it is later on: the process
  // stays up. One that refuses us (a wrong password, no such database) fails the start at once.
  const giveUpAt = performance.now() + FIRST_START_PATIENCE_MS;
  for (let i = 0; ; i++) {
    try {
      current = await startRunner();
      break;
    } catch (err) {
      if (!isDatabaseAway(err) || performance.now() > giveUpAt) throw err;
      if (i === 0) log.warn({ err: (err as Error).message }, 'the database is away as the worker starts; waiting for it');
      await sleep(RESTART_RETRY_MS[Math.min(i, RESTART_RETRY_MS.length - 1)]!);
    }
  }
  const firstPoolId = current.poolId;
  /**
   * A runner graphile-worker shut down by itself is left to finish in its own time (0.18.0's own
   * shutdown can wait for good on a worker whose completion failed) and a new one is started as
   * soon as the database answers. The old pool is declared ended and its jobs released: they run
   * again on the new runner, where a job whose email this process still holds finds the lease
   * and waits for it. A runner still up whose fetches keep failing is replaced the same way, and
   * asked to stop.
   */
  function restart(old: Current, reason: string): Promise<void> | undefined {
    // Before the first runner is in place (`current` unset) there is nothing to replace yet.
    if (old !== current || restarting) return restarting;
    log.warn({ pool: old.poolId, reason }, old.shuttingDown || old.ended
      ? 'the job runner shut down on its own after a database error; starting a new one'
      : 'the job runner can no longer fetch jobs; starting a new one');
    // From here the old runner reaches the database no more. Its jobs are about to be released, and
    // a task of its still running may key its job again (an email requeued), which reuses that very
    // row once it is free: the old runner's completion, which deletes by job id, would delete the
    // new job with it. Refused, the completion leaves the row, and a job run twice finds its email
    // already settled.
    old.replaced = true;
    restarting = (async () => {
      for (let i = 0; !stopping; i++) {
        try {
          // One statement on a fresh connection, each wait bounded (connect, answer): this runs
          // while the server may still be away, and postgres.js can leave a query on an ended
          // connection unanswered.
          const probe = newPgPool();
          try {
            // What this process holds is claimed again first: once the old pool's jobs are free,
            // a runner may fetch the job of an email whose send is still waiting to be recorded.
            await opts.beforeFetching?.(probe);
            await probe.query(`
              with ended as (
                update worker_heartbeats set ended_at = coalesce(ended_at, now()), last_seen_at = '-infinity', jobs_released = true
                where pool_id = $1
              )
              select graphile_worker.force_unlock_workers(array[$1]::text[])`, [old.poolId]);
          } finally {
            void probe.end().catch(() => {});
          }
          if (stopping) return;
          const started = startRunner();
          // A start that hangs (the server went away again mid-start) is abandoned and tried again.
          const next = await Promise.race([started, sleep(START_TIMEOUT_MS, undefined, { ref: false }).then(() => undefined)]);
          if (!next) {
            void started.then((late) => late.runner.stop().catch(() => {}).then(() => late.pgPool.end()).catch(() => {}), () => {});
            throw new Error(`the job runner did not start within ${START_TIMEOUT_MS / 1000} s`);
          }
          // The old runner keeps its pool until it has finished its own shutdown. It is asked to stop
          // whatever started its end: a pool graphile-worker shut down by itself leaves the runner's
          // cron running, which would keep meeting the refusing pool. What it runs now ends first.
          if (!old.ended) {
            old.shuttingDown = true;
            void old.runner.stop().catch(() => {});
          }
          void old.runner.promise.catch(() => {}).then(() => old.pgPool.end()).catch(() => {});
          current = next;
          restarts++;
          log.info({ pool: current.poolId, restarts }, 'job runner started again');
          // The new pool's heartbeat row, written now rather than at the next beat. Not waited
          // for: a statement postgres.js leaves unanswered must not hold the restart open.
          void settleWithin(beat(), BEAT_TIMEOUT_MS).catch((err: unknown) => log.debug({ err: (err as Error).message }, 'first heartbeat of the new runner failed'));
          return;
        } catch (err) {
          log.debug({ err: (err as Error).message }, 'job runner restart waits for the database');
          await sleep(RESTART_RETRY_MS[Math.min(i, RESTART_RETRY_MS.length - 1)]!, undefined, { ref: false });
        }
      }
    })().finally(() => {
      restarting = undefined;
      // The new runner may itself have been shut down (the server went away again) while this
      // restart was finishing; its request found a restart under way, so it is answered here.
      if (!stopping && current.shuttingDown) void restart(current, 'the new job runner shut down as it started');
    });
    return restarting;
  }

  // The first beat, and one every ten minutes, sweeps the locked jobs; the others only read the
  // heartbeats, so a beat costs the same whatever the backlog. A pool is declared ended only by a
  // worker that has itself been beating without a break for the whole dead-after window: after a
  // database outage every pool's row is stale, and the first worker back must not take the
  // others' leases before they had the time to beat again.
  let lastFullSweep = -Infinity;
  let lastBeatOk = -Infinity;
  let beatingSince = performance.now();
  const ids = () => [current.poolId, ...(opts.holderId ? [opts.holderId] : [])];
  const beat = async () => {
    await sql`
      insert into worker_heartbeats (pool_id, hostname, pid)
      select id, ${os.hostname()}, ${process.pid} from unnest(${ids()}::text[]) as id
      on conflict (pool_id) do update set last_seen_at = now() where worker_heartbeats.ended_at is null`;
    const now = performance.now();
    if (now - lastBeatOk > heartbeatMs * 2.5) beatingSince = now;
    lastBeatOk = now;
    if (now - beatingSince < deadAfterSeconds * 1000) return;
    if (now - lastFullSweep < FULL_SWEEP_MS) return releaseJobsOfStalePools(sql, log, deadAfterSeconds);
    await releaseJobsOfDeadPools(sql, log, deadAfterSeconds);
    lastFullSweep = performance.now();
  };
  // The first runner shut down by a database error while it started, before a restart could
  // replace it: replaced now. A first beat the database refuses is made at the next one.
  if (current.shuttingDown || current.ended) void restart(current, 'the job runner shut down as it started');
  await beat().catch((err: unknown) => log.warn({ err: (err as Error).message }, 'worker heartbeat failed'));
  let beating: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    beating = beat().catch((err) => log.warn({ err: (err as Error).message }, 'worker heartbeat failed'));
  }, heartbeatMs);

  return {
    get runner() { return current.runner; },
    poolId: firstPoolId,
    get restarts() { return restarts; },
    async stop() {
      stopping = true;
      clearInterval(timer);
      await settleWithin(beating, BEAT_TIMEOUT_MS).catch(() => {});
      await restarting;
      // A shutdown graphile-worker started itself is waited for, not asked for a second time.
      if (!current.ended) await (current.shuttingDown ? current.runner.promise.catch(() => {}) : current.runner.stop());
      await current.pgPool.end();
      // Marked ended rather than deleted: a runner that ended on a database error may still hold
      // jobs it could not give back, and the next sweep of any worker releases them by this row.
      await sql`update worker_heartbeats set last_seen_at = '-infinity', ended_at = now() where pool_id = any(${ids()}::text[])`.catch(() => {});
    },
  };
}

/**
 * Whether an error means the database is restarting or out of reach (refused, reset, ended,
 * starting up, shutting down, a connect timeout), rather than refusing us for good.
 */
export function isDatabaseAway(err: unknown): boolean {
  if (!err || typeof err !== 'object') return false;
  const { code, message } = err as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && (/^(57P0[123]|08)/.test(code) || ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN'].includes(code))) return true;
  return typeof message === 'string' && /Connection terminated|timeout exceeded when trying to connect/.test(message);
}

type ConnectCallback = (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: Error | boolean) => void) => void;

/**
 * The pool, with each client it hands out released at most once: a second release is ignored
 * (`onSecond` is told). graphile-worker 0.18.0 releases its LISTEN client twice when the LISTEN
 * fails after a shutdown already let the client go, as a database restart can arrange; pg-pool
 * throws on the second release, inside a promise nobody handles, and the process would stop on
 * it. Only public API is used: `connect` in both its forms, and each client's `release`.
 */
export function releasingOnce(pool: pg.Pool, onSecond: () => void): pg.Pool {
  const connect = pool.connect.bind(pool) as unknown as (callback?: ConnectCallback) => Promise<pg.PoolClient> | undefined;
  const guard = (client: pg.PoolClient) => {
    const release = client.release.bind(client);
    let released = false;
    const once = (err?: Error | boolean) => {
      if (released) return onSecond();
      released = true;
      release(err);
    };
    client.release = once;
    return once;
  };
  pool.connect = ((callback?: ConnectCallback) => {
    if (!callback) return connect()!.then((client) => { guard(client); return client; });
    connect((err, client, done) => callback(err, client, client ? guard(client) : done));
    return undefined;
  }) as typeof pool.connect;
  return pool;
}

/**
 * The pool, refusing every new connection once `replaced()` answers true: a replaced runner's
 * completions and fetches fail instead of reaching rows that are no longer its own.
 */
function refusingOnceReplaced(pool: pg.Pool, replaced: () => boolean): pg.Pool {
  const connect = pool.connect.bind(pool) as unknown as (callback?: ConnectCallback) => Promise<pg.PoolClient> | undefined;
  const refusal = () => new Error(REPLACED_RUNNER_REFUSAL);
  pool.connect = ((callback?: ConnectCallback) => {
    if (!replaced()) return connect(callback);
    if (!callback) return Promise.reject(refusal());
    queueMicrotask(() => callback(refusal(), undefined, () => {}));
    return undefined;
  }) as typeof pool.connect;
  return pool;
}

/**
 * Whether a heartbeat row has been silent for `deadAfterSeconds`, counted from when the database
 * last started if that is later: a pool or lease holder that could not beat because the server
 * was away (a restart, a failover) gets the whole window after it is back to beat again, however
 * long the outage was. The claim of an email (emails/queries.ts) counts its holder's silence the
 * same way.
 */
export function silentFor(sql: Sql, deadAfterSeconds: number, row = sql`worker_heartbeats`) {
  return sql`greatest(${row}.last_seen_at, pg_postmaster_start_time()) < now() - make_interval(secs => ${deadAfterSeconds})`;
}

/**
 * Releases the jobs of pools whose heartbeat went stale or that stopped, and forgets those pools.
 * It reads only the heartbeat table, whose rows are the live pools and the recently gone ones, so
 * it costs the same with millions of jobs queued; a pool that died before its first heartbeat is
 * left to `releaseJobsOfDeadPools`. Two workers sweeping at once never both release one pool.
 */
export async function releaseJobsOfStalePools(sql: Sql, log: Logger, deadAfterSeconds = DEAD_AFTER_SECONDS) {
  reportReleased(log, await releaseStale(sql, deadAfterSeconds));
}

/**
 * One statement, so atomic without a transaction block (a block whose connection the server ends
 * goes back to postgres.js's pool all the same). Pools are declared ended, not forgotten: a lease
 * naming an ended pool is free at once, while a lease whose holder has no row at all is free only
 * once it runs out. Ended pools are kept a day, long past any lease of theirs.
 */
async function releaseStale(sql: Sql, deadAfterSeconds: number): Promise<string[]> {
  const gone = await sql<{ poolId: string; stopped: boolean }[]>`
    with due as (
      select pool_id, ended_at is not null as stopped from worker_heartbeats
      where not jobs_released and (ended_at is not null or ${silentFor(sql, deadAfterSeconds)})
      for update
    ), ended as (
      update worker_heartbeats h set ended_at = coalesce(h.ended_at, now()), last_seen_at = '-infinity', jobs_released = true
      from due where h.pool_id = due.pool_id
      returning h.pool_id, due.stopped
    ), unlocked as (
      select graphile_worker.force_unlock_workers(array(select pool_id from ended)) where exists (select 1 from ended)
    ), forgotten as (
      delete from worker_heartbeats where ended_at < now() - interval '1 day'
    )
    select pool_id, stopped, (select count(*) from unlocked) as unlocked from ended`;
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
  const stale = await releaseStale(sql, deadAfterSeconds);
  const rowless = await sql<{ lockedBy: string }[]>`
    with dead as (
      select distinct j.locked_by from graphile_worker.jobs j
      where j.locked_by is not null
        and j.locked_at < now() - make_interval(secs => ${deadAfterSeconds})
        and pg_postmaster_start_time() < now() - make_interval(secs => ${deadAfterSeconds})
        and not exists (
          select 1 from worker_heartbeats h
          where h.pool_id = j.locked_by and not ${silentFor(sql, deadAfterSeconds, sql`h`)})
    ), unlocked as (
      select graphile_worker.force_unlock_workers(array(select locked_by from dead)) where exists (select 1 from dead)
    )
    select locked_by, (select count(*) from unlocked) as unlocked from dead`;
  reportReleased(log, [...stale, ...rowless.map((d) => d.lockedBy)]);
}

/** The work's outcome, or a rejection once `ms` have passed without one. */
function settleWithin<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms); });
  work.catch(() => {}); // settled after the caller gave up: nobody is listening any more
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}
