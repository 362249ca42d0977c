import type { PendingQuery, Row } from 'postgres';
import type { Sql, TxSql } from '../platform/db.ts';
import { ID_PREFIX, newId } from '../platform/ids.ts';
import { FLUSH_KEY_PREFIX, FLUSH_MAX_ATTEMPTS, flushLock, markInflight } from '../webhooks/queries.ts';

export const EVENT_TYPES = [
  'email.sent',
  'email.delivered',
  'email.delivery_delayed',
  'email.bounced',
  'email.complained',
  'email.failed',
  'email.opened',
  'email.clicked',
  'email.received',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Events about a project or its SES account rather than an email (§19.6); their payload's email_id is null. */
export const PROJECT_EVENT_TYPES = [
  'project.reputation_warning',
  'project.sending_paused',
  'project.sending_resumed',
  'account.enforcement_changed',
] as const;
export type ProjectEventType = (typeof PROJECT_EVENT_TYPES)[number];

/** Events about a contact (§23.1), recorded by src/contacts/events.ts; their payload's email_id is null too. */
export const CONTACT_EVENT_TYPES = [
  'contact.created',
  'contact.updated',
  'contact.deleted',
  'contact.topics.updated',
] as const;
export type ContactEventType = (typeof CONTACT_EVENT_TYPES)[number];

/** Every type a webhook endpoint can be sent, and filter on. */
export const WEBHOOK_EVENT_TYPES = [...EVENT_TYPES, ...PROJECT_EVENT_TYPES, ...CONTACT_EVENT_TYPES] as const;

export type NewEvent = {
  projectId: string;
  emailId: string;
  type: EventType;
  data: Record<string, unknown>;
  reputation?: ReputationCount;
  /** Provider notifications may repeat; the same key makes the repeat a no-op. */
  dedupeKey?: string;
};

/** An event to record for an email that the statement's source yields. */
export type EmailEvent = {
  type: EventType;
  data: Record<string, unknown>;
  dedupeKey?: string;
  /** What the event adds to the reputation counters (§19.1): recipients sent, hard-bounced or complaining. */
  reputation?: ReputationCount;
};

export type ReputationCount = { metric: 'sent' | 'bounced' | 'complained'; n: number };

/**
 * One statement that records events for the emails `source` yields (as `id, project_id, tags`),
 * each event's `data` with the email's tags, one pending delivery per active endpoint of the
 * project that takes the event's type, and a `webhook__flush` job for each endpoint they go to. `source` may itself change
 * the email (an UPDATE … RETURNING), so the change and everything it causes commit together in
 * one round trip. A repeated dedupe key records nothing. `add_jobs` is called only when there
 * are deliveries: it notifies the workers even for an empty list. The project's daily counters
 * move in the same statement (countEvents), so they never disagree with the events.
 *
 * Yields `matched` (rows of `source`) and `event_ids` (the events recorded, in order).
 */
export function recordEventsStatement(sql: Sql | TxSql, source: PendingQuery<Row[]>, events: EmailEvent[]) {
  const rows = events.map((e) => ({
    id: newId('event'), type: e.type, data: e.data, dedupe_key: e.dedupeKey ?? null,
    rep_metric: e.reputation?.metric ?? null, rep_n: e.reputation?.n ?? null,
  }));
  const counts = rows.some((r) => r.rep_metric !== null);
  return sql<{ matched: number; eventIds: string[] }[]>`
    with source as (${source}),
    new_events as (
      insert into events (id, project_id, email_id, type, data, dedupe_key, reputation_metric, reputation_n)
      -- A broadcast's email names its broadcast (§23.6); a source without the column names none.
      select e.id, s.project_id, s.id, e.type, e.data || jsonb_build_object('tags', coalesce(s.tags, '[]'::jsonb))
        || jsonb_strip_nulls(jsonb_build_object('broadcast_id', to_jsonb(s)->'broadcast_id')), e.dedupe_key,
        ${counts ? reputationMetric(sql) : sql`null, null`}
      from source s cross join jsonb_to_recordset(${sql.json(rows as never)}) as e(id text, type text, data jsonb, dedupe_key text, rep_metric text, rep_n int)
      ${counts ? sql`left join provider_connections pc on pc.project_id = s.project_id left join project_reputation pr on pr.project_id = s.project_id` : sql``}
      order by e.id
      on conflict (project_id, dedupe_key, email_id) where dedupe_key is not null do nothing
      returning id, project_id, email_id, type, reputation_metric, reputation_n),
    counted as (${countEvents(sql, sql`new_events`)}),
    ${counts ? sql`reputation_counted as (${countReputation(sql)}),` : sql``}
    ${newDeliveries(sql)}
    select (select count(*)::int from source) as matched,
      array(select id from new_events order by id) as event_ids,
      ${flushJobsForNewDeliveries(sql)} as jobs`;
}

/**
 * The `new_deliveries` CTE of a statement that has a `new_events (id, project_id, email_id, type)` CTE: one
 * pending delivery per active endpoint of the project that takes the event's type (an endpoint
 * without `event_types` takes every type).
 */
export function newDeliveries(sql: Sql | TxSql) {
  return sql`new_deliveries as (
      insert into webhook_deliveries (id, project_id, endpoint_id, event_id, email_id, next_attempt_at)
      select mailroom_new_id(${ID_PREFIX.delivery}), ev.project_id, w.id, ev.id, ev.email_id, now()
      from new_events ev
      join webhook_endpoints w on w.project_id = ev.project_id and w.status = 'active'
        and (w.event_types is null or ev.type = any(w.event_types))
      returning id, project_id, endpoint_id, email_id, tableoid::regclass::text as partition),
    ${markInflight(sql, sql`new_deliveries`)}`;
}



/**
 * A `webhook__flush` job for each endpoint `new_deliveries` went to that has none waiting and due,
 * as a select expression. Each endpoint's flush lock is taken (shared) before its waiting job is
 * looked for: a flush that locks that job afterwards waits for this transaction before its last
 * look, so it takes these deliveries or queues the next flush (see flushLock). An endpoint whose
 * flush runs, or waits for later, gets a job. `add_jobs` is called only when there is one to add:
 * it notifies every worker, which then looks for jobs, even for an empty list.
 */
export function flushJobsForNewDeliveries(sql: Sql | TxSql) {
  return sql`case when exists (select 1 from new_deliveries) then (
        with locked as materialized (
          select f.endpoint_id, f.project_id
          from (select distinct endpoint_id, project_id from new_deliveries) f
          -- Taken before the look below, as each row is made; see flushLock.
          cross join lateral (select ${flushLock(sql, sql`f.endpoint_id`, 'shared')}) l),
        specs as (
          select array(
            select row('webhook__flush', json_build_object('endpoint_id', f.endpoint_id, 'project_id', f.project_id), null, now(),
                       ${FLUSH_MAX_ATTEMPTS}, ${FLUSH_KEY_PREFIX} || f.endpoint_id, null, null)::graphile_worker.job_spec
            from locked f
            where not exists (
              select 1 from graphile_worker._private_jobs j
              where j.key = ${FLUSH_KEY_PREFIX} || f.endpoint_id and j.locked_at is null and j.run_at <= now())
            order by f.endpoint_id) as jobs)
        select case when cardinality(jobs) > 0 then (select count(*) from graphile_worker.add_jobs(jobs)) else 0 end from specs)
      end`;
}

/**
 * Adds the events a CTE named `source` yields (`project_id, type`, and `created_at` if not now) to
 * project_daily_counts, or takes them away with `sign` -1. Each connection adds to its own row
 * (shard = its backend pid): a connection runs one transaction at a time, so two sends never wait
 * on the same counter row, and no two transactions can lock counter rows in opposite orders.
 */
export function countEvents(sql: Sql | TxSql, source: PendingQuery<Row[]>, opts: { sign?: 1 | -1; at?: 'now' | 'created_at' } = {}) {
  const day = opts.at === 'created_at' ? sql`(created_at at time zone 'UTC')::date` : sql`(now() at time zone 'UTC')::date`;
  return sql`
    insert into project_daily_counts as c (project_id, day, metric, shard, n)
    select project_id, ${day}, type, pg_backend_pid(), ${opts.sign ?? 1} * count(*)
    from ${source} group by 1, 2, 3
    order by 1, 2, 3
    on conflict (project_id, day, metric, shard) do update set n = c.n + excluded.n`;
}

/**
 * What an event adds to the reputation counters (§19.1), as the `reputation_metric, reputation_n`
 * columns of its row: nothing for a project not connected to SES (sink mail never reaches SES);
 * a hard bounce or complaint about mail sent before the project's last resume is `_late`, so it
 * counts in the account's windows of the account's other projects and not in its own project's
 * (§19.4, §22.9). The counters are moved from these columns, and `stats rebuild` sums the same
 * columns: one definition for both. Needs `e` (the recordset), `s` (the source), `pc` and `pr`.
 */
function reputationMetric(sql: Sql | TxSql) {
  // The email is looked up by id only for a bounce or complaint after a resume (CASE runs the
  // subquery only then): a lookup by a column value costs a plan over every partition.
  return sql`
    case when e.rep_metric is null or pc.project_id is null then null
      when e.rep_metric <> 'sent' and pr.counting_since is not null and coalesce(
        (select em.sent_at from emails em where em.id = s.id and em.project_id = s.project_id), now()) < pr.counting_since
        then e.rep_metric || '_late'
      else e.rep_metric end,
    case when e.rep_metric is null or pc.project_id is null then null else e.rep_n end`;
}

/**
 * Adds the recorded events' reputation counts (their reputation_metric and reputation_n) to the
 * hourly counters of the project and its SES account, sharded like countEvents.
 */
function countReputation(sql: Sql | TxSql) {
  return sql`
    insert into reputation_counts as c (project_id, account_id, hour, metric, shard, n)
    select ne.project_id, pc.ses_account_id, date_trunc('hour', now()), ne.reputation_metric, pg_backend_pid(), sum(ne.reputation_n)
    from new_events ne join provider_connections pc on pc.project_id = ne.project_id
    where ne.reputation_metric is not null and ne.reputation_n > 0
    group by 1, 2, 3, 4
    order by 1, 2, 3, 4
    on conflict (project_id, account_id, hour, metric, shard) do update set n = c.n + excluded.n`;
}

/**
 * Records an event about the project itself (PROJECT_EVENT_TYPES) or one of its contacts
 * (CONTACT_EVENT_TYPES) with its deliveries and flush jobs, in the caller's transaction. It belongs to no email: its email_id is a fresh email-kind
 * id naming none, so it and its deliveries live in today's partitions like any other event.
 */
export async function recordProjectEvent(tx: Sql | TxSql, projectId: string, type: ProjectEventType | ContactEventType, data: Record<string, unknown>) {
  await tx`
    with new_events as (
      insert into events (id, project_id, email_id, type, data)
      values (${newId('event')}, ${projectId}, ${newId('email')}, ${type}, ${tx.json(data as never)})
      returning id, project_id, email_id, type),
    counted as (${countEvents(tx, tx`new_events`)}),
    ${newDeliveries(tx)}
    select ${flushJobsForNewDeliveries(tx)} as jobs`;
}

/** The email as a statement source, unchanged. */
function emailSource(sql: Sql | TxSql, projectId: string, emailId: string) {
  return sql`select id, project_id, tags, broadcast_id from emails where id = ${emailId} and project_id = ${projectId}`;
}

/**
 * Writes one event with its deliveries and jobs (see recordEventsStatement). Returns the event id,
 * or undefined for a duplicate.
 */
export async function recordEvent(tx: Sql | TxSql, event: NewEvent): Promise<string | undefined> {
  const [row] = await recordEventsStatement(tx, emailSource(tx, event.projectId, event.emailId), [event]);
  return row?.eventIds[0];
}
