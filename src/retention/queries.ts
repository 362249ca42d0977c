import type { Sql, TxSql } from '../platform/db.ts';
import { countEvents, recordEventsStatement } from '../events/record.ts';
import { SUBMITTED_MESSAGE_ID_TTL } from '../emails/queries.ts';

/** Emails a step removes or purges at most: a step holds its row locks for a few milliseconds. */
export const RETENTION_BATCH = 500;

/** The statuses of an email not sent yet: retention never purges nor removes one (§18.5). */
export const UNSENT = ['scheduled', 'queued', 'sending'] as const;

/** The `last_error` of an email that was still unsent when RETENTION_DAYS ran out. */
export const EXPIRED_UNSENT = 'expired before it could be sent';

/**
 * Where retention's clock lives: the database's. Every cutoff is computed here from now(), so a
 * process whose clock is wrong can never make retention run ahead (§18.6).
 */
export async function retentionCutoffs(sql: Sql, retentionDays: number, bodyRetentionDays: number) {
  const [row] = await sql<[{ cutoffDay: string; bodyCutoff: Date; unsentCutoff: Date }]>`
    select to_char((now() at time zone 'UTC')::date - ${retentionDays}::int, 'YYYY-MM-DD') as cutoff_day,
      now() - make_interval(days => ${bodyRetentionDays}) as body_cutoff,
      now() - make_interval(days => ${retentionDays}) as unsent_cutoff`;
  return row;
}

/**
 * Fails up to `batch` emails still unsent RETENTION_DAYS after their creation, with their
 * `email.failed` events (and webhook deliveries) in the same statement, so they are settled, and
 * told, before retention may remove them. A send holding one (its lease still running) is left to
 * finish; rows another transaction holds are skipped. Returns how many failed.
 */
export async function failExpiredUnsent(sql: Sql | TxSql, retentionDays: number, batch = RETENTION_BATCH): Promise<number> {
  const message = `Still unsent ${retentionDays} days after it was created (RETENTION_DAYS); it was never sent.`;
  const [row] = await recordEventsStatement(sql, sql`
    with doomed as (
      select id, project_id from emails
      where status in ${sql([...UNSENT])} and created_at < now() - make_interval(days => ${retentionDays})
        and (status <> 'sending' or lease_expires_at is null or lease_expires_at < now())
      order by created_at
      limit ${batch}
      for update skip locked)
    update emails m set status = 'failed', last_error = ${EXPIRED_UNSENT}, updated_at = now(),
      lease_owner = null, lease_expires_at = null
    from doomed d where m.id = d.id and m.project_id = d.project_id
    returning m.id, m.project_id, m.tags, m.broadcast_id`, [{ type: 'email.failed', data: { reason: EXPIRED_UNSENT, message } }]);
  return row?.matched ?? 0;
}

/**
 * Whether a day's partitions still hold work in flight: an email not sent yet, or a webhook
 * delivery still pending. Such a day is not removed (§18.5): its unsent emails fail first, once
 * RETENTION_DAYS after their creation, and their `email.failed` deliveries go out.
 */
export async function dayInFlight(sql: Sql, day: string): Promise<boolean> {
  const suffix = `_p${day.replaceAll('-', '')}`;
  const [deliveries] = await sql<[{ busy: boolean }]>`
    select exists (select 1 from ${sql('webhook_deliveries' + suffix)} where status = 'pending') as busy`;
  if (deliveries.busy) return true;
  const [emails] = await sql<[{ busy: boolean }]>`
    select exists (select 1 from ${sql('emails' + suffix)} where status in ${sql([...UNSENT])}) as busy`;
  return emails.busy;
}


/**
 * Removes up to `batch` emails created before `cutoff`, oldest first, with their webhook
 * deliveries, events, tag and recipient entries and idempotency keys, in one statement, and takes their events
 * off the daily counters. Whole days go as dropped partitions (partitions.ts); this removes what is
 * left outside them (`daysFrom`, the oldest day partition: those from it to the cutoff are days). Rows another transaction holds are skipped (SKIP LOCKED), so a step never
 * waits on a send; and a send never waits on a step, which only locks emails long past any send.
 * An unsent email, or one with a webhook delivery still pending, stays (§18.5). Returns how many emails went.
 */
export async function removeExpiredEmails(sql: Sql | TxSql, cutoff: Date, opts: { daysFrom?: string; batch?: number } = {}): Promise<number> {
  const batch = opts.batch ?? RETENTION_BATCH;
  // The rows of day partitions from `daysFrom` to the cutoff go with their day, never one by one.
  const outsideDays = opts.daysFrom === undefined ? sql`` : sql`and (id < mailroom_id_floor('email_', ${opts.daysFrom}::date::timestamp at time zone 'UTC')
        or id >= mailroom_id_floor('email_', ${cutoff}))`;
  const [row] = await sql<[{ removed: number }]>`
    with doomed as (
      select id, project_id, tags, to_addresses, cc_addresses, bcc_addresses from emails
      where created_at < ${cutoff} and status not in ${sql([...UNSENT])} ${outsideDays}
        and not exists (select 1 from webhook_deliveries w where w.email_id = emails.id and w.project_id = emails.project_id and w.status = 'pending')
      order by created_at
      limit ${batch}
      for update skip locked),
    gone_deliveries as (
      delete from webhook_deliveries w using doomed d
      where w.email_id = d.id and w.project_id = d.project_id),
    gone_keys as (
      delete from idempotency_keys k using doomed d
      where k.email_id = d.id and k.project_id = d.project_id),
    gone_events as (
      delete from events e using doomed d
      where e.email_id = d.id and e.project_id = d.project_id
      returning e.project_id, e.type, e.created_at),
    uncounted as (${countEvents(sql, sql`gone_events`, { sign: -1, at: 'created_at' })}),
    gone_tags as (
      delete from email_tags t
      using doomed d cross join lateral jsonb_array_elements(d.tags) x
      where t.project_id = d.project_id and t.name = x->>'name' and t.value = x->>'value' and t.email_id = d.id),
    gone_recipients as (
      delete from email_recipients r
      using doomed d cross join lateral unnest(d.to_addresses || d.cc_addresses || d.bcc_addresses) a
      where r.project_id = d.project_id and r.address = mailroom_bare_address(a) and r.email_id = d.id),
    gone as (
      delete from emails m using doomed d where m.id = d.id
      returning m.id)
    select count(*)::int as removed from gone`;
  return row.removed;
}

/** The partitions of emails (daily ones and a migrated database's `_before`), oldest first. */
export async function emailPartitions(sql: Sql): Promise<{ name: string; day: string | null }[]> {
  return sql<{ name: string; day: string | null }[]>`
    select c.relname as name,
      to_char(to_date(substring(c.relname from '^emails_p([0-9]{8})$'), 'YYYYMMDD'), 'YYYY-MM-DD') as day
    from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent = 'emails'::regclass and not i.inhdetachpending
    order by day nulls first`;
}

/**
 * Purges html, text, attachments and the relay's raw message of up to `batch` emails of one
 * partition of emails whose bodies are still there, marking them `body_purged`: all of them, or
 * (with `createdBefore`) those created before it. Addresses the partition table itself, so each
 * step plans over one table, and finds its rows through the partition's index of unpurged bodies.
 * Skips locked rows, and emails not sent yet (§18.5): a scheduled email keeps its body until it
 * is sent, however long that is. Returns how many it purged.
 */
export async function purgePartitionBodies(sql: Sql, partition: string, createdBefore?: Date, batch = RETENTION_BATCH): Promise<number> {
  const rows = await withStepLockTimeout(sql, (tx) => tx`
    update ${sql(partition)} set html = null, text = null, attachments = '[]'::jsonb, body_purged = true, raw_message = null
    where id in (
      select id from ${sql(partition)}
      where not body_purged and status not in ${sql([...UNSENT])} ${createdBefore ? sql`and created_at < ${createdBefore}` : sql``}
      order by created_at
      limit ${batch}
      for update skip locked)`);
  return rows.count;
}

/** How long a retention step waits for a table lock before it leaves that table for a later run. */
const STEP_LOCK_TIMEOUT = '1s';

/**
 * Runs one retention step in its own transaction that waits at most STEP_LOCK_TIMEOUT for a table
 * lock: a table another session locks against writes (LOCK TABLE, a stuck DDL) is left for a
 * later run (isLockTimeout), never waited on.
 */
export function withStepLockTimeout<T>(sql: Sql, work: (tx: TxSql) => Promise<T>): Promise<T> {
  return sql.begin(async (tx) => {
    await tx`select set_config('lock_timeout', ${STEP_LOCK_TIMEOUT}, true)`;
    return work(tx);
  }) as Promise<T>;
}

/** Whether an error is a lock not had within its lock_timeout. */
export const isLockTimeout = (err: unknown) => (err as { code?: string }).code === '55P03';

/** How long the relay's Message-ID dedupe remembers a Message-ID (SUBMITTED_MESSAGE_ID_TTL). */
export async function pruneSubmittedMessageIds(sql: Sql | TxSql): Promise<void> {
  await sql`delete from submitted_message_ids where created_at < now() - ${SUBMITTED_MESSAGE_ID_TTL}::interval`;
}

/**
 * Folds the counter rows of finished days (before yesterday, which no send still writes) into
 * shard 0, and, after a run that removed emails, drops days whose count is zero (every event of
 * the day removed). Keeps the counter table at one row per project, day and type.
 */
export async function foldDailyCounts(sql: Sql | TxSql, afterRemoval: boolean): Promise<void> {
  await sql`
    with moved as (
      delete from project_daily_counts
      where day < (now() at time zone 'UTC')::date - 1 and shard <> 0
      returning project_id, day, metric, n),
    folded as (
      insert into project_daily_counts as c (project_id, day, metric, shard, n)
      select project_id, day, metric, 0, sum(n) from moved group by 1, 2, 3
      order by 1, 2, 3
      on conflict (project_id, day, metric, shard) do update set n = c.n + excluded.n)
    select 1`;
  if (!afterRemoval) return;
  await sql`
    delete from project_daily_counts
    where day < (now() at time zone 'UTC')::date - 1 and shard = 0 and n = 0`;
}

/**
 * Folds the webhook endpoints' counter rows of finished hours into shard 0, and drops the hours
 * past two days (ops.webhook_health reads 24): at most a few rows per endpoint and hour.
 */
export async function foldEndpointCounts(sql: Sql | TxSql): Promise<void> {
  await sql`
    with moved as (
      delete from webhook_endpoint_counts
      where hour < date_trunc('hour', now()) and shard <> 0
      returning endpoint_id, project_id, hour, metric, n),
    folded as (
      insert into webhook_endpoint_counts as c (endpoint_id, project_id, hour, metric, shard, n)
      select endpoint_id, project_id, hour, metric, 0, sum(n) from moved group by 1, 2, 3, 4
      order by 1, 3, 4
      on conflict (endpoint_id, hour, metric, shard) do update set n = c.n + excluded.n)
    select 1`;
  await sql`delete from webhook_endpoint_counts where hour < now() - interval '2 days'`;
}

/**
 * Removes up to 10,000 recipient days (recipient_days) older than the oldest day partition of
 * email_recipients still attached: their days were removed. One batch a run, so removing a month
 * costs no more than a day; until it goes, such a row only makes a recipient's page look into a
 * day that reads nothing. A migrated database's `_before` partition keeps every one while it lasts.
 * Returns how many it removed.
 */
export async function pruneRecipientDays(sql: Sql | TxSql): Promise<number> {
  const rows = await sql`
    delete from recipient_days where ctid = any(array(
      select ctid from recipient_days
      where day < (select min(mailroom_partition_day(inhrelid::regclass::text)) from pg_inherits
                   where inhparent = 'email_recipients'::regclass and not inhdetachpending)
      limit 10000))`;
  return rows.count;
}
