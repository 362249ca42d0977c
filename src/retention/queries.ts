import type { Sql, TxSql } from '../platform/db.ts';
import { countEvents } from '../events/record.ts';
import { SUBMITTED_MESSAGE_ID_TTL } from '../emails/queries.ts';

/** Emails a step removes or purges at most: a step holds its row locks for a few milliseconds. */
export const RETENTION_BATCH = 500;


/**
 * Removes up to `batch` emails created before `cutoff`, oldest first, with their webhook
 * deliveries, events, tag and recipient entries and idempotency keys, in one statement, and takes their events
 * off the daily counters. Whole days go as dropped partitions (partitions.ts); this removes what is
 * left outside them. Rows another transaction holds are skipped (SKIP LOCKED), so a step never
 * waits on a send; and a send never waits on a step, which only locks emails long past any send.
 * Returns how many emails went.
 */
export async function removeExpiredEmails(sql: Sql | TxSql, cutoff: Date, batch = RETENTION_BATCH): Promise<number> {
  const [row] = await sql<[{ removed: number }]>`
    with doomed as (
      select id, project_id, tags, to_addresses, cc_addresses, bcc_addresses from emails
      where created_at < ${cutoff}
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
 * Skips locked rows. Returns how many it purged.
 */
export async function purgePartitionBodies(sql: Sql, partition: string, createdBefore?: Date, batch = RETENTION_BATCH): Promise<number> {
  const rows = await sql`
    update ${sql(partition)} set html = null, text = null, attachments = '[]'::jsonb, body_purged = true, raw_message = null
    where id in (
      select id from ${sql(partition)}
      where not body_purged ${createdBefore ? sql`and created_at < ${createdBefore}` : sql``}
      order by created_at
      limit ${batch}
      for update skip locked)`;
  return rows.count;
}

/** How long the relay's Message-ID dedupe remembers a Message-ID (SUBMITTED_MESSAGE_ID_TTL). */
export async function pruneSubmittedMessageIds(sql: Sql): Promise<void> {
  await sql`delete from submitted_message_ids where created_at < now() - ${SUBMITTED_MESSAGE_ID_TTL}::interval`;
}

/**
 * Folds the counter rows of finished days (before yesterday, which no send still writes) into
 * shard 0, and, after a run that removed emails, drops days whose count is zero (every event of
 * the day removed). Keeps the counter table at one row per project, day and type.
 */
export async function foldDailyCounts(sql: Sql, afterRemoval: boolean): Promise<void> {
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
