import type { Sql } from '../platform/db.ts';
import { countEvents } from '../events/record.ts';

/**
 * emails, events, webhook_deliveries and email_tags are partitioned by email id, one partition per
 * UTC day (`<table>_pYYYYMMDD`, made by the `mailroom_ensure_partitions` SQL function). Everything
 * about an email lives in its day's partitions, so retention drops a day as four tables. There is
 * no default partition (it would stop PostgreSQL reading the partitions in id order), so the days
 * ahead are made early: by the migration, at worker start and by every retention run.
 */
export const PARTITIONED_TABLES = ['webhook_deliveries', 'events', 'email_tags', 'emails'] as const;

/** Days of partitions kept ready ahead of today, so a send never waits for one to be made. */
export const PARTITION_DAYS_AHEAD = 7;

/**
 * Creating or dropping a partition locks its parent table for a moment; one that cannot have the
 * lock within this gives up (and is tried again later), so no send or read queues behind it for
 * longer. Measured at 1 million emails with 500 ms: accepts while a month was dropped had a p99 of
 * 527 ms, the timeout itself.
 */
const PARTITION_LOCK_TIMEOUT = '100ms';

const DAY_MS = 86_400_000;
const utcDay = (at: Date) => at.toISOString().slice(0, 10);

/** Whether an error is a lock not had within PARTITION_LOCK_TIMEOUT. */
const isLockTimeout = (err: unknown) => (err as { code?: string }).code === '55P03';

/**
 * Makes the missing daily partitions from `from` to PARTITION_DAYS_AHEAD days after `now`, one day
 * per transaction (each holds its parents' locks for the few milliseconds of four CREATE TABLEs).
 * Returns how many tables it created; a day whose lock was not had is left for the next call.
 */
export async function ensurePartitions(sql: Sql, opts: { now?: Date; from?: Date } = {}): Promise<number> {
  const now = opts.now ?? new Date();
  const first = opts.from ?? now;
  let created = 0;
  for (let t = Date.parse(utcDay(first)); t <= Date.parse(utcDay(now)) + PARTITION_DAYS_AHEAD * DAY_MS; t += DAY_MS) {
    const day = utcDay(new Date(t));
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

/** The UTC days that have daily partitions, oldest first (as YYYY-MM-DD). */
export async function partitionDays(sql: Sql): Promise<string[]> {
  const rows = await sql<{ day: string }[]>`
    select to_char(to_date(substr(c.relname, length('emails_p') + 1), 'YYYYMMDD'), 'YYYY-MM-DD') as day
    from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent = 'emails'::regclass and c.relname ~ '^emails_p[0-9]{8}$'
    order by 1`;
  return rows.map((r) => r.day);
}

/**
 * Drops one day's partitions of the four tables, after taking the day's events off the daily
 * counters and deleting the idempotency keys of its emails, all in one transaction. The events
 * partition is locked first (SHARE), so an event arriving for that day's emails meanwhile waits
 * and is not missed by the counters. Returns how many emails went, or undefined when a lock was
 * not had within PARTITION_LOCK_TIMEOUT (the day is tried again next run).
 */
export async function dropPartitionDay(sql: Sql, day: string): Promise<number | undefined> {
  const suffix = `_p${day.replaceAll('-', '')}`;
  const [deliveries, events, tags, emails] = PARTITIONED_TABLES.map((t) => t + suffix) as [string, string, string, string];
  try {
    return await sql.begin(async (tx) => {
      await tx`select set_config('lock_timeout', ${PARTITION_LOCK_TIMEOUT}, true)`;
      // Two runs at once (the worker's and `cli -- retention run`) take a day in turn; the second finds it gone.
      await tx`select pg_advisory_xact_lock(hashtext(${emails}))`;
      const [present] = await tx`select to_regclass(${emails}) is not null as present`;
      if (!present!.present) return 0;
      await tx`lock table ${tx(events)} in share mode`;
      await tx`with gone as (select project_id, type, created_at from ${tx(events)}) ${countEvents(tx, tx`gone`, { sign: -1, at: 'created_at' })}`;
      await tx`
        delete from idempotency_keys
        where email_id >= mailroom_id_floor('email_', ${day}::date::timestamp at time zone 'UTC')
          and email_id < mailroom_id_floor('email_', (${day}::date + 1)::timestamp at time zone 'UTC')`;
      const [count] = await tx<[{ n: number }]>`select count(*)::int as n from ${tx(emails)}`;
      await tx`drop table ${tx(deliveries)}, ${tx(events)}, ${tx(tags)}, ${tx(emails)}`;
      return count.n;
    });
  } catch (err) {
    if (isLockTimeout(err)) return undefined;
    throw err;
  }
}
