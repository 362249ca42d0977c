import type { PendingQuery, Row } from 'postgres';
import type { ReservedSql, Sql, TxSql } from '../platform/db.ts';
import { REMOVAL_LOCK } from '../retention/partitions.ts';

type Delta = { projectId: string; day: string; metric: string; n: number };
type ReputationDelta = { projectId: string; accountId: string | number; hour: Date; metric: string; n: number };
type EndpointDelta = { endpointId: string; projectId: string; hour: Date; metric: string; n: number };
type BroadcastDelta = { broadcastId: string; projectId: string; metric: string; n: number };

/**
 * Recomputes every number kept only to make reads fast from the rows it summarises: the daily
 * event counters per project (from events), the hourly reputation counters (from events and
 * their emails), the webhook endpoints' hourly outcome counters of the last two days and last
 * errors (from the deliveries), the broadcasts' counters (from their emails and recipients), the tag entries the tag filter reads (from each email's tags) and the recipient
 * entries the `to` filter reads (from each email's to, cc and bcc). Returns how many derived rows
 * it found.
 *
 * It takes no lock that accepts, sends or event ingestion wait on (§18.10). The counters are
 * additive (each event adds to them in the statement that records it), so the rebuild reads the
 * events and the counters in one snapshot, and adds the difference afterwards: an event recorded
 * after the snapshot is in neither, and is counted once, by its own statement. While it reads, it
 * holds retention's day-removal lock, so no day is half removed in its snapshot; the events of a
 * day detached and not dropped yet are counted, since retention takes them off when it drops it.
 */
export async function rebuildStats(sql: Sql): Promise<number> {
  const { daily, reputation, endpoints, broadcasts, found } = await readDifferences(sql);
  await sql.begin(async (tx) => {
    if (daily.length) {
      await tx`
        insert into project_daily_counts as c (project_id, day, metric, shard, n)
        select d.project_id, d.day::date, d.metric, pg_backend_pid(), d.n
        from jsonb_to_recordset(${tx.json(daily.map((d) => ({ project_id: d.projectId, day: d.day, metric: d.metric, n: d.n })))}) as d(project_id text, day text, metric text, n bigint)
        order by 1, 2, 3
        on conflict (project_id, day, metric, shard) do update set n = c.n + excluded.n`;
    }
    if (reputation.length) {
      await tx`
        insert into reputation_counts as c (project_id, account_id, hour, metric, shard, n)
        select d.project_id, d.account_id, d.hour, d.metric, pg_backend_pid(), d.n
        from jsonb_to_recordset(${tx.json(reputation.map((d) => ({ project_id: d.projectId, account_id: d.accountId, hour: d.hour, metric: d.metric, n: d.n })))}) as d(project_id text, account_id bigint, hour timestamptz, metric text, n bigint)
        order by 1, 2, 3, 4
        on conflict (project_id, account_id, hour, metric, shard) do update set n = c.n + excluded.n`;
    }
    if (endpoints.length) {
      await tx`
        insert into webhook_endpoint_counts as c (endpoint_id, project_id, hour, metric, shard, n)
        select d.endpoint_id, d.project_id, d.hour, d.metric, pg_backend_pid(), d.n
        from jsonb_to_recordset(${tx.json(endpoints.map((d) => ({ endpoint_id: d.endpointId, project_id: d.projectId, hour: d.hour, metric: d.metric, n: d.n })))}) as d(endpoint_id text, project_id text, hour timestamptz, metric text, n bigint)
        order by 1, 3, 4
        on conflict (endpoint_id, hour, metric, shard) do update set n = c.n + excluded.n`;
    }
    if (broadcasts.length) {
      await tx`
        insert into broadcast_counts as c (broadcast_id, project_id, metric, shard, n)
        select d.broadcast_id, d.project_id, d.metric, pg_backend_pid(), d.n
        from jsonb_to_recordset(${tx.json(broadcasts.map((d) => ({ broadcast_id: d.broadcastId, project_id: d.projectId, metric: d.metric, n: d.n })))}) as d(broadcast_id text, project_id text, metric text, n bigint)
        order by 1, 3
        on conflict (broadcast_id, metric, shard) do update set n = c.n + excluded.n`;
    }
    await tx`delete from webhook_endpoint_counts where hour < ${ENDPOINT_HOURS_FROM(tx)}`;
    // Each endpoint's last error, from its newest failed or retried attempt of the last 24 hours.
    await tx`
      update webhook_endpoints w set last_error = d.error, last_error_at = d.at
      from (select distinct on (endpoint_id) endpoint_id, project_id, error, last_attempt_at as at from webhook_deliveries
            where error is not null and last_attempt_at > now() - interval '24 hours'
            order by endpoint_id, last_attempt_at desc) d
      where w.id = d.endpoint_id and w.project_id = d.project_id and (w.last_error_at is null or w.last_error_at < d.at)`;
    // Hours past the 31 days the reputation windows read are no longer kept, as before.
    await tx`delete from reputation_counts where hour <= now() - interval '31 days'`;
  });
  const entries = await rebuildEntries(sql);
  return found + entries;
}

/** The counters' differences from the rows they count, read in one snapshot under retention's lock. */
async function readDifferences(sql: Sql) {
  const conn = await sql.reserve();
  try {
    await conn`select pg_advisory_lock(hashtext(${REMOVAL_LOCK}))`;
    try {
      await conn`begin isolation level repeatable read read only`;
      try {
        const detached = await detachedEventTables(conn);
        // Names from the catalog, matched to events_pYYYYMMDD: safe to spell out.
        const source: PendingQuery<Row[]> = detached.length
          ? conn.unsafe(`(select project_id, email_id, type, data, created_at from events${detached.map((t) => ` union all select project_id, email_id, type, data, created_at from "${t}"`).join('')})`)
          : conn<Row[]>`events`;
        const [truth] = await conn<[{ n: number }]>`
          select count(*)::int as n from (select 1 from ${source} ev group by project_id, (created_at at time zone 'UTC')::date, type) t`;
        const daily = await conn<Delta[]>`
          with truth as (
            select project_id, (created_at at time zone 'UTC')::date as day, type as metric, count(*)::bigint as n
            from ${source} ev group by 1, 2, 3),
          kept as (
            select project_id, day, metric, sum(n)::bigint as n from project_daily_counts group by 1, 2, 3)
          select coalesce(t.project_id, k.project_id) as project_id, to_char(coalesce(t.day, k.day), 'YYYY-MM-DD') as day,
            coalesce(t.metric, k.metric) as metric, (coalesce(t.n, 0) - coalesce(k.n, 0))::float8 as n
          from truth t full join kept k on k.project_id = t.project_id and k.day = t.day and k.metric = t.metric
          where coalesce(t.n, 0) <> coalesce(k.n, 0)`;
        const reputation = await conn<ReputationDelta[]>`
          with truth as (${reputationTruth(conn)}),
          kept as (
            select project_id, account_id, hour, metric, sum(n)::bigint as n from reputation_counts
            where hour > now() - interval '31 days' group by 1, 2, 3, 4)
          select coalesce(t.project_id, k.project_id) as project_id, coalesce(t.account_id, k.account_id) as account_id,
            coalesce(t.hour, k.hour) as hour, coalesce(t.metric, k.metric) as metric, (coalesce(t.n, 0) - coalesce(k.n, 0))::float8 as n
          from truth t full join kept k on k.project_id = t.project_id and k.account_id = t.account_id and k.hour = t.hour and k.metric = t.metric
          where coalesce(t.n, 0) <> coalesce(k.n, 0)`;
        const [rep] = await conn<[{ n: number }]>`select count(*)::int as n from (${reputationTruth(conn)}) r`;
        const endpoints = await conn<EndpointDelta[]>`
          with truth as (${endpointTruth(conn)}),
          kept as (
            select endpoint_id, project_id, hour, metric, sum(n)::bigint as n from webhook_endpoint_counts
            where hour >= ${ENDPOINT_HOURS_FROM(conn)} group by 1, 2, 3, 4)
          select coalesce(t.endpoint_id, k.endpoint_id) as endpoint_id, coalesce(t.project_id, k.project_id) as project_id,
            coalesce(t.hour, k.hour) as hour, coalesce(t.metric, k.metric) as metric, (coalesce(t.n, 0) - coalesce(k.n, 0))::float8 as n
          from truth t full join kept k on k.endpoint_id = t.endpoint_id and k.hour = t.hour and k.metric = t.metric
          where coalesce(t.n, 0) <> coalesce(k.n, 0)`;
        const [ends] = await conn<[{ n: number }]>`select count(*)::int as n from (${endpointTruth(conn)}) r`;
        const broadcasts = await conn<BroadcastDelta[]>`
          with truth as (${broadcastTruth(conn)}),
          kept as (
            select c.broadcast_id, c.project_id, c.metric, sum(c.n)::bigint as n from broadcast_counts c
            join broadcasts b on b.id = c.broadcast_id and b.project_id = c.project_id and b.counts_kept is null
            group by 1, 2, 3)
          select coalesce(t.broadcast_id, k.broadcast_id) as broadcast_id, coalesce(t.project_id, k.project_id) as project_id,
            coalesce(t.metric, k.metric) as metric, (coalesce(t.n, 0) - coalesce(k.n, 0))::float8 as n
          from truth t full join kept k on k.broadcast_id = t.broadcast_id and k.metric = t.metric
          where coalesce(t.n, 0) <> coalesce(k.n, 0)`;
        const [casts] = await conn<[{ n: number }]>`select count(*)::int as n from (${broadcastTruth(conn)}) r`;
        return { daily: [...daily], reputation: [...reputation], endpoints: [...endpoints], broadcasts: [...broadcasts], found: truth.n + rep.n + ends.n + casts.n };
      } finally {
        await conn`commit`.catch(() => {});
      }
    } finally {
      await conn`select pg_advisory_unlock(hashtext(${REMOVAL_LOCK}))`;
    }
  } finally {
    conn.release();
  }
}

/**
 * The events tables of days retention detached and has not dropped yet (a removal it will
 * finish): their events are still on the counters, which retention takes them off as it drops them.
 */
async function detachedEventTables(conn: ReservedSql): Promise<string[]> {
  const rows = await conn<{ name: string }[]>`
    select c.relname as name from pg_class c left join pg_inherits i on i.inhrelid = c.oid
    where c.relkind = 'r' and pg_table_is_visible(c.oid) and c.relname ~ '^events_p[0-9]{8}$'
      and (i.inhrelid is null or i.inhdetachpending)`;
  return rows.map((r) => r.name);
}

/**
 * The reputation counters (§19.1) of the last 31 days from the events, each in the hour it was
 * recorded: the sum of what each event's row says it added (reputation_metric, reputation_n), the
 * very columns the live path counted from (record.ts), so a rebuild finds exactly what was
 * written. Only the attached events are read: a day detached for removal is older than
 * RETENTION_DAYS, past the 31 days kept.
 *
 * Events without those columns (recorded before they existed, or rows loaded by hand) are derived
 * as they were: recipients of each `email.sent` of a project connected to SES (all it was
 * addressed to: which were suppressed is not kept), Permanent bounces and complaints per
 * recipient named, `_late` when about mail sent before the project's last resume and recorded
 * after it.
 */
function reputationTruth(conn: ReservedSql) {
  return conn`
    select project_id, account_id, hour, metric, sum(n)::bigint as n from (
      select ev.project_id, pc.ses_account_id as account_id, date_trunc('hour', ev.created_at) as hour, ev.reputation_metric as metric, ev.reputation_n as n
      from events ev join provider_connections pc on pc.project_id = ev.project_id
      where ev.created_at > now() - interval '31 days' and ev.reputation_metric is not null and ev.reputation_n > 0
      union all
      select ev.project_id, pc.ses_account_id, date_trunc('hour', ev.created_at), m.metric, m.n
      from events ev
      join provider_connections pc on pc.project_id = ev.project_id
      join emails e on e.id = ev.email_id and e.project_id = ev.project_id
      left join project_reputation pr on pr.project_id = ev.project_id
      cross join lateral (select
        case when ev.type = 'email.sent' then 'sent'
          else case ev.type when 'email.bounced' then 'bounced' else 'complained' end
            || case when pr.counting_since is not null and e.sent_at < pr.counting_since and ev.created_at >= pr.counting_since then '_late' else '' end
        end as metric,
        case when ev.type = 'email.sent' then cardinality(e.to_addresses) + cardinality(e.cc_addresses) + cardinality(e.bcc_addresses)
             else greatest(1, coalesce(jsonb_array_length(case when jsonb_typeof(ev.data->'to') = 'array' then ev.data->'to' end), 1)) end as n) m
      where ev.created_at > now() - interval '31 days'
        and ev.reputation_metric is null
        and (ev.type = 'email.sent' or ev.type = 'email.complained' or (ev.type = 'email.bounced' and ev.data->>'bounce_type' = 'permanent'))
    ) counted
    group by 1, 2, 3, 4`;
}

/** The first hour of the webhook endpoints' counters kept: two days (ops.webhook_health reads 24 hours). */
const ENDPOINT_HOURS_FROM = (sql: Sql | TxSql | ReservedSql) =>
  sql`date_trunc('hour', now()) - interval '47 hours'`;

/**
 * Each endpoint's settled deliveries by hour of their last attempt (or, settled without one, of
 * their making) over the hours kept, as the settling statement counts them (webhooks/attempt.ts).
 */
function endpointTruth(conn: ReservedSql) {
  return conn`
    select endpoint_id, project_id, date_trunc('hour', coalesce(last_attempt_at, created_at)) as hour, status as metric, count(*)::bigint as n
    from webhook_deliveries
    where status in ('delivered', 'failed') and coalesce(last_attempt_at, created_at) >= ${ENDPOINT_HOURS_FROM(conn)}
    group by 1, 2, 3, 4`;
}

/**
 * Each broadcast's counters as its emails and recipients stand (those whose counts are not kept on
 * their row yet), as the page writer and the emails' trigger count them (migration 000038).
 */
function broadcastTruth(conn: ReservedSql) {
  return conn`
    select e.broadcast_id, e.project_id, m.metric, count(*)::bigint as n
    from emails e
    join broadcasts b on b.id = e.broadcast_id and b.project_id = e.project_id and b.counts_kept is null
    cross join lateral (values
      ('queued', e.status in ('scheduled', 'queued', 'sending')),
      ('sent', e.status = 'sent'),
      ('failed', e.status = 'failed'),
      ('delivered', e.delivered_at is not null),
      ('opened', e.opened_at is not null),
      ('clicked', e.clicked_at is not null)) m(metric, counted)
    where e.broadcast_id is not null and m.counted
    group by 1, 2, 3
    union all
    select r.broadcast_id, r.project_id, 'too_large', count(*)
    from broadcast_recipients r
    join broadcasts b on b.id = r.broadcast_id and b.project_id = r.project_id and b.counts_kept is null
    where r.skipped = 'too_large'
    group by 1, 2`;
}

/**
 * The tag and recipient entries (and the recipients' days), made to match the emails row by row: no table lock, so an accept
 * writing its own entries meanwhile never waits; it commits its email and entries together, so
 * each statement sees both or neither.
 */
async function rebuildEntries(sql: Sql): Promise<number> {
  await sql`
    delete from email_tags t
    where not exists (
      select 1 from emails e
      where e.id = t.email_id and e.project_id = t.project_id
        and e.tags @> jsonb_build_array(jsonb_build_object('name', t.name, 'value', t.value)))`;
  await sql`
    insert into email_tags (project_id, name, value, email_id)
    select e.project_id, x->>'name', x->>'value', e.id
    from emails e cross join lateral jsonb_array_elements(e.tags) x
    where e.tags <> '[]'::jsonb
    on conflict do nothing`;
  await sql`
    delete from email_recipients r
    where not exists (
      select 1 from emails e
      where e.id = r.email_id and e.project_id = r.project_id
        and r.address in (select mailroom_bare_address(a) from unnest(e.to_addresses || e.cc_addresses || e.bcc_addresses) a))`;
  await sql`
    insert into email_recipients (project_id, address, email_id)
    select e.project_id, mailroom_bare_address(a), e.id
    from emails e cross join lateral unnest(e.to_addresses || e.cc_addresses || e.bcc_addresses) a
    on conflict do nothing`;
  // The days each address was sent to, from the entries' partitions.
  await sql`
    with truth as (
      select distinct project_id, address, mailroom_partition_day(tableoid::regclass::text) as day from email_recipients)
    delete from recipient_days d
    where not exists (select 1 from truth t where t.project_id = d.project_id and t.address = d.address and t.day = d.day)`;
  await sql`
    insert into recipient_days (project_id, address, day)
    select distinct project_id, address, mailroom_partition_day(tableoid::regclass::text) from email_recipients
    on conflict do nothing`;
  const [kept] = await sql<[{ n: number }]>`select (select count(*) from email_tags)::int + (select count(*) from email_recipients)::int as n`;
  return kept.n;
}
