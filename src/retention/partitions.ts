import type { ReservedSql, Sql } from '../platform/db.ts';
import { countEvents } from '../events/record.ts';

/**
 * emails, events, webhook_deliveries, email_tags and email_recipients are partitioned by email id, one partition per
 * UTC day (`<table>_pYYYYMMDD`, made by the `mailroom_ensure_partitions` SQL function). Everything
 * about an email lives in its day's partitions, so retention drops a day as five tables. There is
 * no default partition (it would stop PostgreSQL reading the partitions in id order), so the days
 * ahead are made early: by the migration, at worker start and by every retention run.
 */
export const PARTITIONED_TABLES = ['emails', 'email_tags', 'email_recipients', 'events', 'webhook_deliveries'] as const;

/** Days of partitions kept ready ahead of today, so a send never waits for one to be made. */
export const PARTITION_DAYS_AHEAD = 7;

/**
 * Making a day's partitions locks their parents only in SHARE UPDATE EXCLUSIVE mode (ATTACH
 * PARTITION, see `mailroom_ensure_partitions`), which no send or read waits on, but which waits on
 * a day being detached; a day that cannot have its locks within this is left for the next call.
 */
const PARTITION_LOCK_TIMEOUT = '100ms';

/**
 * How long removing a day may wait: the detach waits for every transaction that began before it
 * to end (a long report, say) without holding up anything else meanwhile. A day not finished
 * within this is finished by a later run.
 */
export const DAY_REMOVAL_WAIT_MS = 30_000;

/** The lock two runs at once (the worker's and `cli -- retention run`) take in turn to remove days; `stats rebuild` takes it to count. */
export const REMOVAL_LOCK = 'mailroom: retention removes partition days';

const utcDay = (at: Date) => at.toISOString().slice(0, 10);

/** Whether an error is a lock not had within PARTITION_LOCK_TIMEOUT. */
const isLockTimeout = (err: unknown) => (err as { code?: string }).code === '55P03';
/** Whether an error is a statement cancelled by its statement_timeout. */
const isStatementTimeout = (err: unknown) => (err as { code?: string }).code === '57014';

/**
 * Makes the missing daily partitions from `from` (a day; default today) to
 * PARTITION_DAYS_AHEAD days after today, one day per transaction, today being the database's.
 * Returns how many tables it created; a day whose locks were not had within
 * PARTITION_LOCK_TIMEOUT (a day being detached holds its parents) is left for the next call.
 */
export async function ensurePartitions(sql: Sql, opts: { from?: string | Date } = {}): Promise<number> {
  const from = opts.from instanceof Date ? utcDay(opts.from) : opts.from;
  const days = await sql<{ day: string }[]>`
    select to_char(d, 'YYYY-MM-DD') as day
    from generate_series(coalesce(${from ?? null}::date, (now() at time zone 'UTC')::date),
      (now() at time zone 'UTC')::date + ${PARTITION_DAYS_AHEAD}::int, interval '1 day') d`;
  return ensureDays(sql, days.map((d) => d.day));
}

/** Makes the missing partitions of each of `days` (YYYY-MM-DD), one day per transaction. */
async function ensureDays(sql: Sql, days: string[]): Promise<number> {
  let created = 0;
  for (const day of days) {
    try {
      created += await sql.begin(async (tx) => {
        await tx`select set_config('lock_timeout', ${PARTITION_LOCK_TIMEOUT}, true)`;
        const [row] = await tx<[{ n: number }]>`select mailroom_ensure_partitions(${day}::date, ${day}::date) as n`;
        return row.n;
      });
    } catch (err) {
      if (!isLockTimeout(err)) throw err;
    }
  }
  return created;
}

/** Whether an error is a row that found no partition of its table (its day was never made). */
export const isMissingPartition = (err: unknown) =>
  (err as { code?: string }).code === '23514' && /no partition of relation/.test((err as Error).message ?? '');

/**
 * Makes the partitions of the days the given ids were made in (ULIDs after their prefix), when a
 * write found none: no worker ran to make them ahead (§18.7). Bounded: a day at most a week from
 * the database's today, so a forged id cannot make partitions for arbitrary days.
 */
export async function ensurePartitionsForIds(sql: Sql, ids: string[]): Promise<number> {
  const days = [...new Set(ids.map(idDay).filter((d): d is string => d !== undefined))];
  const [row] = await sql<[{ days: string[] }]>`
    select coalesce(array_agg(to_char(d, 'YYYY-MM-DD') order by d), '{}') as days
    from unnest(${days}::date[]) d
    where d between (now() at time zone 'UTC')::date - 7 and (now() at time zone 'UTC')::date + 7`;
  return ensureDays(sql, row.days);
}

/**
 * Runs `write` (emails `ids` about to be inserted, in a transaction of its own); if it failed for a
 * day with no partition (no worker ran for days to make them), makes that day's partitions and
 * runs it once more, so accepts never depend on a worker's upkeep (§18.7).
 */
export async function withDayPartitions<T>(sql: Sql, ids: string[], write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (!isMissingPartition(err) || (await ensurePartitionsForIds(sql, ids)) === 0) throw err;
    return write();
  }
}

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
/** The UTC day an id (`prefix_` + ULID) was made, from the ULID's ten time characters. */
function idDay(id: string): string | undefined {
  const ulid = id.slice(id.lastIndexOf('_') + 1, id.lastIndexOf('_') + 11);
  let ms = 0;
  for (const ch of ulid) {
    const v = CROCKFORD.indexOf(ch);
    if (v < 0) return undefined;
    ms = ms * 32 + v;
  }
  return ulid.length === 10 ? utcDay(new Date(ms)) : undefined;
}

/** The UTC days that have daily partitions in place (none of them being detached), oldest first, as YYYY-MM-DD. */
export async function partitionDays(sql: Sql): Promise<string[]> {
  const rows = await sql<{ day: string }[]>`
    select to_char(to_date(substr(c.relname, length('emails_p') + 1), 'YYYYMMDD'), 'YYYY-MM-DD') as day
    from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent = 'emails'::regclass and not i.inhdetachpending and c.relname ~ '^emails_p[0-9]{8}$'
    order by 1`;
  return rows.map((r) => r.day);
}

/**
 * The UTC days whose removal a run began and did not finish (it was stopped, or timed out): a
 * day's table left detached, or pending detach. Only retention ever detaches a day's table
 * (`mailroom_ensure_partitions` makes and attaches a day's tables in one transaction).
 */
export async function unfinishedDays(sql: Sql): Promise<string[]> {
  const rows = await sql<{ day: string }[]>`
    select distinct to_char(to_date(substring(c.relname from '_p([0-9]{8})$'), 'YYYYMMDD'), 'YYYY-MM-DD') as day
    from pg_class c left join pg_inherits i on i.inhrelid = c.oid
    where c.relkind = 'r' and pg_table_is_visible(c.oid)
      and c.relname ~ '^(emails|events|webhook_deliveries|email_tags|email_recipients)_p[0-9]{8}$'
      and (i.inhrelid is null or i.inhdetachpending)
    order by 1`;
  return rows.map((r) => r.day);
}

/** A day's tables as they stand (attached to their parent, pending detach, or detached), in PARTITIONED_TABLES order. */
async function dayTables(sql: ReservedSql, day: string) {
  const names = PARTITIONED_TABLES.map((t) => t + `_p${day.replaceAll('-', '')}`);
  return sql<{ parent: string; name: string; attached: boolean; pending: boolean }[]>`
    select p.parent, p.name, i.inhrelid is not null as attached, coalesce(i.inhdetachpending, false) as pending
    from unnest(${PARTITIONED_TABLES as unknown as string[]}::text[], ${names}::text[]) with ordinality as p(parent, name, n)
    join pg_class c on c.oid = to_regclass(p.name)
    left join pg_inherits i on i.inhrelid = c.oid
    order by p.n`;
}

/**
 * Removes one day's partitions of the day's tables without holding a lock that sends or reads
 * wait on, and returns how many emails went, or undefined when it could not finish within `waitMs`
 * (the day is finished by a later run).
 *
 * Each table is first taken out of its parent with DETACH PARTITION … CONCURRENTLY (SHARE UPDATE
 * EXCLUSIVE on the parent; it waits for the transactions already using the parent to end, while
 * new ones no longer see the partition). Emails go first: once they are out of sight, nothing new
 * is written about them (an event finds no email), so no write fails for want of its partition;
 * a reader may briefly see the day's events or deliveries without their email. Then, in one
 * transaction on the detached tables, the day's events come off the daily counters, its emails' idempotency keys go, and the
 * tables are dropped. No event can enter a detached table, so the counters stay exact.
 *
 * Idempotent and safe to stop anywhere: a detach left pending is finished with FINALIZE, tables
 * already detached are taken as they are, and a day already gone returns 0.
 */
export async function dropPartitionDay(sql: Sql, day: string, waitMs = DAY_REMOVAL_WAIT_MS): Promise<number | undefined> {
  const conn = await sql.reserve();
  try {
    // DETACH … CONCURRENTLY cannot run in a transaction block, hence a connection of its own.
    await conn`select set_config('statement_timeout', ${`${waitMs}ms`}, false)`;
    await conn`select pg_advisory_lock(hashtext(${REMOVAL_LOCK}))`;
    try {
      return await removeDay(conn, day);
    } finally {
      await conn`select pg_advisory_unlock(hashtext(${REMOVAL_LOCK}))`;
    }
  } catch (err) {
    if (isStatementTimeout(err) || isLockTimeout(err)) return undefined;
    throw err;
  } finally {
    await conn`reset statement_timeout`.catch(() => {});
    conn.release();
  }
}

async function removeDay(conn: ReservedSql, day: string): Promise<number> {
  for (const t of await dayTables(conn, day)) {
    if (t.pending) await conn`alter table ${conn(t.parent)} detach partition ${conn(t.name)} finalize`;
    else if (t.attached) await conn`alter table ${conn(t.parent)} detach partition ${conn(t.name)} concurrently`;
  }
  const tables = await dayTables(conn, day);
  if (!tables.length) return 0;
  if (tables.some((t) => t.attached)) throw new Error(`partitions of ${day} still attached after their detach`);
  const named = (parent: string) => tables.find((t) => t.parent === parent)?.name;
  const [events, emails] = [named('events'), named('emails')];
  await conn`begin`;
  try {
    // Only the dropped tables' own locks, and FOREIGN KEY triggers' on projects and endpoints.
    await conn`select set_config('lock_timeout', ${PARTITION_LOCK_TIMEOUT}, true)`;
    if (events) {
      await conn`with gone as (select project_id, type, created_at from ${conn(events)}) ${countEvents(conn, conn`gone`, { sign: -1, at: 'created_at' })}`;
    }
    await conn`
      delete from idempotency_keys
      where email_id >= mailroom_id_floor('email_', ${day}::date::timestamp at time zone 'UTC')
        and email_id < mailroom_id_floor('email_', (${day}::date + 1)::timestamp at time zone 'UTC')`;
    const [count] = emails ? await conn<[{ n: number }]>`select count(*)::int as n from ${conn(emails)}` : [{ n: 0 }];
    await conn`drop table ${conn(tables.map((t) => t.name))}`;
    await conn`commit`;
    return count.n;
  } catch (err) {
    await conn`rollback`.catch(() => {});
    throw err;
  }
}
