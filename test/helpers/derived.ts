import assert from 'node:assert/strict';
import type { Sql } from '../../src/platform/db.ts';

/**
 * Every derived number against a direct count of the rows it summarises: the daily counters per
 * project, day and event type against events, the tag entries against each email's tags, and the
 * recipient entries against each email's to, cc and bcc, and the days each address was sent to
 * against the recipient entries' day partitions (which they must cover).
 */
export async function assertDerivedMatchBaseRows(sql: Sql, what: string) {
  const counted = await sql<{ key: string; n: number }[]>`
    select project_id || ' ' || day || ' ' || metric as key, sum(n)::int as n
    from project_daily_counts group by project_id, day, metric having sum(n) <> 0 order by 1`;
  const direct = await sql<{ key: string; n: number }[]>`
    select project_id || ' ' || (created_at at time zone 'UTC')::date || ' ' || type as key, count(*)::int as n
    from events group by project_id, (created_at at time zone 'UTC')::date, type order by 1`;
  assert.deepEqual(counted.map((r) => [r.key, r.n]), direct.map((r) => [r.key, r.n]), `${what}: daily counters = events`);
  const tags = await sql<{ key: string }[]>`select project_id || ' ' || name || ':' || value || ' ' || email_id as key from email_tags order by 1`;
  const fromEmails = await sql<{ key: string }[]>`
    select e.project_id || ' ' || (x->>'name') || ':' || (x->>'value') || ' ' || e.id as key
    from emails e cross join lateral jsonb_array_elements(e.tags) x order by 1`;
  assert.deepEqual(tags.map((r) => r.key), fromEmails.map((r) => r.key), `${what}: email_tags = emails.tags`);
  const recipients = await sql<{ key: string }[]>`select project_id || ' ' || address || ' ' || email_id as key from email_recipients order by 1`;
  const addressed = await sql<{ key: string }[]>`
    select distinct e.project_id || ' ' || mailroom_bare_address(a) || ' ' || e.id as key
    from emails e cross join lateral unnest(e.to_addresses || e.cc_addresses || e.bcc_addresses) a order by 1`;
  assert.deepEqual(recipients.map((r) => r.key), addressed.map((r) => r.key), `${what}: email_recipients = to, cc and bcc`);
  const days = await sql<{ key: string }[]>`select project_id || ' ' || address || ' ' || day as key from recipient_days order by 1`;
  const entryDays = await sql<{ key: string }[]>`
    select distinct project_id || ' ' || address || ' ' || mailroom_partition_day(tableoid::regclass::text) as key from email_recipients order by 1`;
  // Every entry's day is listed (or a search would miss it). A day may stay listed after retention
  // removed its entries row by row: it only makes a page look into a day that reads nothing, and
  // goes with its day, or at the next rebuild.
  const listed = new Set(days.map((r) => r.key));
  assert.deepEqual(entryDays.map((r) => r.key).filter((k) => !listed.has(k)), [], `${what}: recipient_days holds the days of email_recipients`);
}
