import type { Sql } from '../platform/db.ts';
import { countEvents } from '../events/record.ts';

/**
 * Removes up to `batch` received emails created before `cutoff`, oldest first, with their
 * `email.received` events (taken off the daily counters, as for sent emails) and webhook
 * deliveries, in one statement. One whose delivery is still pending is kept until it is
 * delivered or fails (§22.12), as a day of sent mail is. Their events live in a partition of their own (`rcv_…` ids),
 * which no day's drop touches, so they go here. The S3 objects stay: the bucket's lifecycle
 * owns them. Returns how many went.
 */
export async function removeExpiredReceived(sql: Sql, cutoff: Date, batch: number): Promise<number> {
  const [row] = await sql<[{ removed: number }]>`
    with doomed as (
      select id, project_id from received_emails r where created_at < ${cutoff}
        and not exists (select 1 from webhook_deliveries w where w.email_id = r.id and w.project_id = r.project_id and w.status = 'pending')
      order by created_at limit ${batch} for update skip locked),
    gone_deliveries as (
      delete from webhook_deliveries w using doomed d where w.email_id = d.id and w.project_id = d.project_id),
    gone_events as (
      delete from events e using doomed d where e.email_id = d.id and e.project_id = d.project_id
      returning e.project_id, e.type, e.created_at),
    uncounted as (${countEvents(sql, sql`gone_events`, { sign: -1, at: 'created_at' })}),
    gone as (
      delete from received_emails r using doomed d where r.id = d.id and r.project_id = d.project_id returning r.id)
    select count(*)::int as removed from gone`;
  return row.removed;
}

/**
 * Purges the bodies of up to `batch` received emails created before `cutoff`: the parsed bodies,
 * the raw bytes kept inline and the way to the S3 object (downloads stop). Addresses, subject,
 * headers, verdicts and the thread stay, as for sent emails.
 */
export async function purgeReceivedBodies(sql: Sql, cutoff: Date, batch: number): Promise<number> {
  const [row] = await sql<[{ purged: number }]>`
    with doomed as (
      select id, project_id from received_emails where created_at < ${cutoff} and not body_purged
      order by created_at limit ${batch} for update skip locked),
    purged as (
      update received_emails r set html = null, text = null, stripped_text = null, raw = null, s3_bucket = null, s3_key = null, body_purged = true
      from doomed d where r.id = d.id and r.project_id = d.project_id returning r.id)
    select count(*)::int as purged from purged`;
  return row.purged;
}
