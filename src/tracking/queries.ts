import type { Sql, TxSql } from '../platform/db.ts';
import { countEvents, flushJobsForNewDeliveries, newDeliveries } from '../events/record.ts';

/** The original URLs of an email's tracked links, by position; written before the message leaves. */
export async function storeTrackedLinks(sql: Sql, projectId: string, emailId: string, links: string[]) {
  await sql`update emails set tracked_links = ${links}::text[] where id = ${emailId} and project_id = ${projectId}`;
}

/** The URL stored for the email's link at `position` (from 0); undefined when there is none. */
export async function trackedLink(sql: Sql, projectId: string, emailId: string, position: number) {
  const [row] = await sql<[{ url: string | null }?]>`
    select tracked_links[${position + 1}::int] as url from emails where id = ${emailId} and project_id = ${projectId}`;
  return row?.url ?? undefined;
}

/**
 * Opens (and clicks) an email records at most: past them a hit is answered as usual and recorded
 * nowhere, so whoever holds a token (a forwarded message, a scanner in a loop) cannot grow the
 * events table and its webhook deliveries without bound.
 */
export const RECORDED_HITS_PER_EMAIL = 100;

/** One open or click, as the routes saw it. */
export type TrackingHit = {
  id: string;
  projectId: string;
  emailId: string;
  type: 'email.opened' | 'email.clicked';
  /** When the request came in: hits are recorded in batches that may commit out of order. */
  at: string;
  data: { user_agent: string; machine: boolean; link?: string };
};

/**
 * Many opens and clicks in one statement: each an event whose `data` gains the email's visible
 * recipients and tags; the first of each kind the email's `opened_at` or `clicked_at`, at the time
 * its request came in (an email already marked is not touched, so a burst of opens of one email
 * does not queue on its row); the project's daily counters; and the webhook deliveries and flush
 * jobs, as every event has. Hits of emails not found (or not of the project in the token), and
 * those past RECORDED_HITS_PER_EMAIL of their type, record nothing. Yields the types recorded.
 */
export function recordHitsStatement(sql: Sql | TxSql, hits: TrackingHit[]) {
  const rows = hits.map((h) => ({ id: h.id, project_id: h.projectId, email_id: h.emailId, type: h.type, at: h.at, data: h.data }));
  return sql<{ types: string[]; jobs: number | null }[]>`
    with hits as (
      select * from jsonb_to_recordset(${sql.json(rows as never)}) as h(id text, project_id text, email_id text, type text, at timestamptz, data jsonb)),
    ranked as (
      select h.*, row_number() over (partition by h.project_id, h.email_id, h.type order by h.id) as nth from hits h),
    kept as (
      select r.* from ranked r
      where r.nth + (select count(*) from (
        select 1 from events ev where ev.email_id = r.email_id and ev.project_id = r.project_id and ev.type = r.type
        limit ${RECORDED_HITS_PER_EMAIL}) seen) <= ${RECORDED_HITS_PER_EMAIL}),
    firsts as (
      update emails e set
        opened_at = least(e.opened_at, f.opened_at),
        clicked_at = least(e.clicked_at, f.clicked_at)
      from (select project_id, email_id,
              min(at) filter (where type = 'email.opened') as opened_at,
              min(at) filter (where type = 'email.clicked') as clicked_at
            from hits group by project_id, email_id) f
      where e.id = f.email_id and e.project_id = f.project_id
        and (e.opened_at is null and f.opened_at is not null or e.clicked_at is null and f.clicked_at is not null)
      returning e.id),
    new_events as (
      insert into events (id, project_id, email_id, type, data)
      select h.id, e.project_id, e.id, h.type,
        h.data || jsonb_build_object('to', to_jsonb(e.to_addresses || e.cc_addresses), 'tags', coalesce(e.tags, '[]'::jsonb))
          || jsonb_strip_nulls(jsonb_build_object('broadcast_id', e.broadcast_id))
      from kept h join emails e on e.id = h.email_id and e.project_id = h.project_id
      order by h.id
      returning id, project_id, email_id, type),
    counted as (${countEvents(sql, sql`new_events`)}),
    ${newDeliveries(sql)}
    select array(select type from new_events) as types, (select count(*)::int from firsts) as firsts,
      ${flushJobsForNewDeliveries(sql)} as jobs`;
}

/** Whether `host` is the tracking domain of one of the project's domains. */
export async function isTrackingDomainOf(sql: Sql, projectId: string, host: string): Promise<boolean> {
  const [row] = await sql<[{ found: boolean }]>`
    select exists (select 1 from domains where project_id = ${projectId} and tracking_domain = ${host}) as found`;
  return row.found;
}
