import postgres from 'postgres';
import { postgresSocket } from './pg-socket.ts';

export type Sql = postgres.Sql<{}>;
export type TxSql = postgres.TransactionSql<{}>;
export type ReservedSql = postgres.ReservedSql<{}>;

/**
 * One pool per process. Column names come back camelCase; JSON values are left alone so
 * caller-supplied keys (custom headers) survive untouched.
 */
export function createSql(url: string, options: { max?: number; appName?: string; genericPlans?: boolean } = {}): Sql {
  return postgres(url, {
    max: options.max ?? 10,
    transform: { column: { from: postgres.toCamel }, undefined: null },
    // Prepared statements keep PostgreSQL's own plan choice. A hot statement on one email names
    // its day's partition (emails/day-table.ts), so its generic plan is one table's and is kept:
    // planned over the parent each time instead, it cost more than it took to run.
    // genericPlans: every statement keeps one plan from its first run (see AppDeps.historySql).
    connection: { application_name: options.appName ?? 'mailroom', ...(options.genericPlans ? { plan_cache_mode: 'force_generic_plan' } : {}) },
    onnotice: () => {},
    backoff: reconnectDelaySeconds,
    // Sockets that outlive postgres.js 3.4.9's lost-flush flaw after a restart (pg-socket.ts).
    ...({ socket: postgresSocket } as object),
  });
}

/**
 * How long a connection waits before connecting again after its connection failed, by how many
 * failures the pool has seen since one last succeeded: 50 ms doubling to at most 500 ms.
 * postgres.js's own backoff counts the failures of every connection of the pool together and
 * grows to 10–20 s, so a restart that failed a few connections a few times left the pool asleep
 * for that long after the database answered again.
 */
export function reconnectDelaySeconds(failures: number): number {
  return Math.min(0.05 * 2 ** Math.max(failures - 1, 0), 0.5);
}

/**
 * Runs a constant statement unprepared, so PostgreSQL plans it for the values at hand each time.
 * A prepared statement keeps the generic plan it made first; one made while the tables were small
 * scans them whole, and nothing replaces it until the next ANALYZE. For the few hot statements
 * whose only good plan is an index lookup. The text never varies; values are always parameters.
 * It costs a round trip more than a prepared statement (postgres.js has PostgreSQL describe the
 * parameters first) and cannot be pipelined; on a hot path, a PL/pgSQL function that EXECUTEs the
 * statement is planned per call just the same and can be called prepared (see `sink_prune`).
 */
export function plannedEachTime<T extends postgres.Row[]>(sql: Sql | TxSql, text: string, params: unknown[]) {
  return sql.unsafe<T>(text, params as never[], { prepare: false });
}

/** Round-trips the database, bounded so a hung connection cannot stall readiness. */
export async function pingDatabase(sql: Sql, timeoutMs = 1000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const query = sql`select 1 as ok`;
    const result = await Promise.race([
      query,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => { query.cancel(); reject(new Error('timeout')); }, timeoutMs);
      }),
    ]);
    return result[0]?.ok === 1;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

/** How long a caller waits for a connection of its own, then for the work on it, before giving up. */
const RESERVE_WAIT_MS = 10_000;
const RESERVED_WORK_MS = 15_000;

/**
 * Runs `work` on a connection held for it alone (for statements written back to back) and gives
 * the connection back after. It works around flaws of postgres.js 3.4.9 when the server ends
 * connections (a restart, a failover, `pg_terminate_backend`):
 * - A released connection goes back to the pool even when the server has ended it, and the next
 *   query written to it throws an uncaught TypeError and never settles (porsager/postgres#1199).
 *   A connection that met a connection-ending error is therefore not released: the pool already
 *   counts it closed, and opens it again when needed. `work` passes every error its queries met,
 *   thrown or not, through `met`.
 * - A reservation still waiting when the server ends the connection it waits for is never
 *   answered (porsager/postgres#1195), and a query written to a held connection that ended can
 *   be lost the same way. Both waits are bounded: the caller gets an error and can go another
 *   way; a connection that comes later, or work that settles later, is released then.
 */
export async function withReservedConnection<T>(
  sql: Sql,
  work: (connection: ReservedSql, met: (err: unknown) => void) => Promise<T>,
  { waitMs = RESERVE_WAIT_MS, workMs = RESERVED_WORK_MS } = {},
): Promise<T> {
  const connection = await reserveWithin(sql, waitMs);
  let ended = false;
  const met = (err: unknown) => { ended ||= endsConnection(err); };
  const running = (async () => {
    try {
      return await work(connection, met);
    } catch (err) {
      met(err);
      throw err;
    } finally {
      if (!ended) connection.release();
    }
  })();
  return settleWithin(running, workMs, `the database did not answer within ${workMs / 1000} s`);
}

function settleWithin<T>(work: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(message)), ms); });
  work.catch(() => {}); // settled after the caller gave up: nobody is listening any more
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

function reserveWithin(sql: Sql, waitMs: number): Promise<ReservedSql> {
  return new Promise((resolve, reject) => {
    let gaveUp = false;
    const timer = setTimeout(() => {
      gaveUp = true;
      reject(new Error(`no database connection came free within ${waitMs / 1000} s`));
    }, waitMs);
    sql.reserve().then((connection) => {
      clearTimeout(timer);
      if (gaveUp) connection.release();
      else resolve(connection);
    }, (err: unknown) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/**
 * Whether an error means the connection is gone: a FATAL or PANIC from the server, postgres.js's
 * own CONNECTION_CLOSED / _DESTROYED / _ENDED, or a socket error. A statement's ordinary
 * ERROR leaves the connection usable.
 */
export function endsConnection(err: unknown): boolean {
  if (!err || typeof err !== 'object') return false;
  const { severity, code, syscall } = err as { severity?: unknown; code?: unknown; syscall?: unknown };
  return severity === 'FATAL' || severity === 'PANIC' || (typeof code === 'string' && code.startsWith('CONNECTION_')) || typeof syscall === 'string';
}

/**
 * A transaction run again when PostgreSQL ends it to break a deadlock (40P01): nothing of it was
 * written, so running it again is safe. For a request's transaction that updates many rows a
 * worker may hold in another order (the worker's shared commits lock several emails at once).
 */
export async function beginRetryingDeadlocks<T>(sql: Sql, work: (tx: TxSql) => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return (await sql.begin(work)) as T;
    } catch (err) {
      if ((err as { code?: unknown }).code !== '40P01' || attempt >= attempts) throw err;
    }
  }
}
