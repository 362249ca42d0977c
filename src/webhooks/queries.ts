import type { PendingQuery, Row } from 'postgres';
import type { Sql, TxSql } from '../platform/db.ts';
import { ID_PREFIX, newId } from '../platform/ids.ts';
import type { DeliveryRow, EndpointRow } from './schemas.ts';

const ENDPOINT_COLUMNS = (sql: Sql | TxSql) => sql`id, project_id, url, status, consecutive_failures, event_types, created_at`;

export async function listEndpoints(sql: Sql, projectId: string) {
  return sql<EndpointRow[]>`
    select ${ENDPOINT_COLUMNS(sql)}
    from webhook_endpoints where project_id = ${projectId} order by id`;
}

export async function getEndpoint(sql: Sql, projectId: string, endpointId: string) {
  const [row] = await sql<[EndpointRow?]>`
    select ${ENDPOINT_COLUMNS(sql)}
    from webhook_endpoints where id = ${endpointId} and project_id = ${projectId}`;
  return row;
}

export const RECENT_DELIVERIES = 100;

const DELIVERY_COLUMNS = (sql: Sql) =>
  sql`d.id, d.event_id, d.status, d.attempt_count, d.created_at, d.last_attempt_at, d.next_attempt_at, d.response_status, d.error`;

export async function listRecentDeliveries(sql: Sql, projectId: string, endpointId: string) {
  return (await listDeliveries(sql, projectId, endpointId, { limit: RECENT_DELIVERIES })).rows;
}

/** An endpoint's deliveries with their event's type and email, newest first, paged by delivery id. */
export async function listDeliveries(sql: Sql, projectId: string, endpointId: string, opts: { limit: number; startingAfter?: string }) {
  const rows = await sql<(DeliveryRow & { eventType: string; emailId: string })[]>`
    select ${DELIVERY_COLUMNS(sql)}, e.type as event_type, e.email_id
    from webhook_deliveries d join events e on e.id = d.event_id and e.email_id = d.email_id and e.project_id = d.project_id
    where d.project_id = ${projectId} and d.endpoint_id = ${endpointId}
      ${opts.startingAfter ? sql`and d.id < ${opts.startingAfter}` : sql``}
    order by d.id desc
    limit ${opts.limit + 1}`;
  return { rows: rows.slice(0, opts.limit), hasMore: rows.length > opts.limit };
}

/** Every delivery of one email's events, oldest first, with the endpoint it went to. */
export async function listDeliveriesOfEmail(sql: Sql, projectId: string, emailId: string) {
  return sql<(DeliveryRow & { eventType: string; endpointId: string; endpointUrl: string })[]>`
    select ${DELIVERY_COLUMNS(sql)}, e.type as event_type, d.endpoint_id, w.url as endpoint_url
    from events e
    join webhook_deliveries d on d.event_id = e.id and d.email_id = e.email_id and d.project_id = e.project_id
    join webhook_endpoints w on w.id = d.endpoint_id and w.project_id = d.project_id
    where e.project_id = ${projectId} and e.email_id = ${emailId} and d.email_id = ${emailId}
    order by d.id`;
}

export async function insertEndpoint(sql: Sql | TxSql, e: { id: string; projectId: string; url: string; secretSealed: Buffer; eventTypes?: string[] | null }) {
  const [row] = await sql<EndpointRow[]>`
    insert into webhook_endpoints (id, project_id, url, secret_encrypted, event_types)
    values (${e.id}, ${e.projectId}, ${e.url}, ${e.secretSealed}, ${e.eventTypes ?? null}::text[])
    returning ${ENDPOINT_COLUMNS(sql)}`;
  return row!;
}

/**
 * A URL edit or a re-enable clears the failure count; a URL edit leaves the status
 * alone, so a disabled endpoint stays disabled. Expressions, not read-modify-write, so a
 * delivery settling at the same moment is not overwritten.
 */
export async function updateEndpoint(
  sql: Sql | TxSql,
  projectId: string,
  endpointId: string,
  change: { url?: string; enabled?: boolean; eventTypes?: string[] | null },
) {
  const url = change.url ?? null;
  const enabled = change.enabled ?? null;
  const [row] = await sql<[EndpointRow?]>`
    update webhook_endpoints set
      url = coalesce(${url}::text, url),
      event_types = ${change.eventTypes === undefined ? sql`event_types` : sql`${change.eventTypes}::text[]`},
      status = case when ${enabled}::boolean is null then status
                    when ${enabled}::boolean then 'active' else 'disabled_by_user' end,
      consecutive_failures = case when ${url}::text is not null or ${enabled}::boolean then 0 else consecutive_failures end,
      updated_at = now()
    where id = ${endpointId} and project_id = ${projectId}
    returning ${ENDPOINT_COLUMNS(sql)}`;
  return row;
}

/**
 * Deletes the endpoint's deliveries, pending ones included, then the endpoint, so no flush or
 * retry finds anything left to post. In that order because a settling attempt locks its delivery,
 * then the endpoint: deleting the endpoint first (its table's statement trigger, migration 000024,
 * takes the deliveries after the row) could deadlock with one. The trigger still takes along any
 * delivery added in between, and every delivery of an endpoint deleted by hand.
 */
export async function deleteEndpoint(tx: TxSql, projectId: string, endpointId: string) {
  await tx`delete from webhook_deliveries where endpoint_id = ${endpointId} and project_id = ${projectId}`;
  const [row] = await tx<[{ id: string; url: string }?]>`
    delete from webhook_endpoints where id = ${endpointId} and project_id = ${projectId} returning id, url`;
  return row;
}

/** The operator CLI names an endpoint by id alone; this finds whose it is. */
export async function findEndpointProject(sql: Sql, endpointId: string) {
  const [row] = await sql<[{ projectId: string }?]>`select project_id from webhook_endpoints where id = ${endpointId}`;
  return row?.projectId;
}

/** Puts a new sealed signing secret in place; undefined when the endpoint is not the project's. */
export async function replaceSecret(sql: Sql | TxSql, projectId: string, endpointId: string, secretSealed: Buffer) {
  const [row] = await sql<[EndpointRow?]>`
    update webhook_endpoints set secret_encrypted = ${secretSealed}, updated_at = now()
    where id = ${endpointId} and project_id = ${projectId}
    returning ${ENDPOINT_COLUMNS(sql)}`;
  return row;
}

export async function getSealedSecret(sql: Sql, projectId: string, endpointId: string) {
  const [row] = await sql<[{ secretEncrypted: Buffer }?]>`
    select secret_encrypted from webhook_endpoints where id = ${endpointId} and project_id = ${projectId}`;
  return row?.secretEncrypted;
}

/**
 * The `webhook__deliver` job for one retry of a delivery, keyed by it so a reschedule replaces the
 * waiting one. Its own attempts only cover crashes; the backoff is the task's (attempt.ts).
 */
export function deliverJob(sql: Sql | TxSql, deliveryId: string, projectId: string, runAt: Date | null = null) {
  return sql`graphile_worker.add_job('webhook__deliver',
    json_build_object('delivery_id', ${deliveryId}::text, 'project_id', ${projectId}::text),
    run_at := coalesce(${runAt}::timestamptz, now()), job_key := ${deliveryId}::text, max_attempts := ${DELIVER_MAX_ATTEMPTS})`;
}

/** A deliver job's own attempts only cover crashes; the delivery's retries are the task's. */
export const DELIVER_MAX_ATTEMPTS = 3;

/** A flush's own attempts only cover crashes, and a flush left with deliveries schedules the next. */
export const FLUSH_MAX_ATTEMPTS = 25;

/** Before an endpoint's id, the job key of its flush: one waits per endpoint, however many deliveries it has. */
export const FLUSH_KEY_PREFIX = 'webhook__flush:';

/**
 * The advisory lock, held to commit, between adding an endpoint's deliveries (shared) and a flush
 * looking for what it leaves behind (exclusive). graphile-worker's `add_job` gives up on a keyed
 * job that a worker locks while the call runs: that flush may already have looked and found
 * nothing. Waiting for the adding transactions first means the flush sees what they added.
 * `endpointId` is SQL: a parameter or a column.
 */
export function flushLock(sql: Sql | TxSql, endpointId: PendingQuery<Row[]>, mode: 'shared' | 'exclusive') {
  const key = sql`hashtextextended(${FLUSH_KEY_PREFIX} || ${endpointId}, 0)`;
  return mode === 'shared' ? sql`pg_advisory_xact_lock_shared(${key})` : sql`pg_advisory_xact_lock(${key})`;
}

/**
 * The `webhook__flush` job that posts an endpoint's deliveries not yet attempted, due now unless
 * `schedule` says otherwise (SQL for its `run_at` and `job_key_mode`). Keyed by the endpoint:
 * adding it again while one waits makes that one due now, and while one runs queues the next,
 * which takes whatever the running one did not.
 */
export function flushJob(sql: Sql | TxSql, endpointId: string, projectId: string, schedule?: { runAt: PendingQuery<Row[]>; keyMode: PendingQuery<Row[]> }) {
  return sql`graphile_worker.add_job('webhook__flush',
    json_build_object('endpoint_id', ${endpointId}::text, 'project_id', ${projectId}::text),
    job_key := ${FLUSH_KEY_PREFIX + endpointId}::text, max_attempts := ${FLUSH_MAX_ATTEMPTS}
    ${schedule ? sql`, run_at := ${schedule.runAt}, job_key_mode := ${schedule.keyMode}` : sql``})`;
}

/**
 * The `inflight_marked` CTE: the partitions of pending deliveries `source` made (`email_id,
 * partition`) for emails older than the hours mailroom_inflight_from always reads (an open, a click
 * or a late bounce of an older email, a redelivery), recorded at once so that no read of what is
 * in flight misses them until the next sweep. A partition is refreshed at most every 30 minutes,
 * so concurrent events seldom share its row's lock.
 */
export function markInflight(sql: Sql | TxSql, source: PendingQuery<Row[]>) {
  return sql`inflight_marked as (
      insert into inflight_partitions (partition, found_at)
      select distinct d.partition, now() from ${source} d
      where d.email_id < mailroom_id_floor(${ID_PREFIX.email}, now() - interval '3 hours')
        and not exists (select 1 from inflight_partitions f where f.partition = d.partition and f.found_at > now() - interval '30 minutes')
      on conflict (partition) do update set found_at = excluded.found_at)`;
}

/**
 * A new pending delivery of the same event to the same endpoint, with its endpoint's flush, in one
 * transaction. Undefined when the delivery is not the endpoint's (or not the project's).
 */
export async function insertRedelivery(sql: Sql, projectId: string, endpointId: string, deliveryId: string) {
  return sql.begin(async (tx) => {
    const [row] = await tx<[DeliveryRow?]>`
      with made as (
        insert into webhook_deliveries (id, project_id, endpoint_id, event_id, email_id, next_attempt_at, redelivery_of)
        select ${newId('delivery')}, project_id, endpoint_id, event_id, email_id, now(), id from webhook_deliveries
        where id = ${deliveryId} and endpoint_id = ${endpointId} and project_id = ${projectId}
        returning id, event_id, status, attempt_count, created_at, last_attempt_at, next_attempt_at, response_status, error,
                  email_id, tableoid::regclass::text as partition),
      ${markInflight(tx, tx`made`)}
      select id, event_id, status, attempt_count, created_at, last_attempt_at, next_attempt_at, response_status, error from made`;
    if (row) await tx`select ${flushLock(tx, tx`${endpointId}::text`, 'shared')}, ${flushJob(tx, endpointId, projectId)}`;
    return row;
  });
}

/** A page of the project's endpoints, newest first (Resend's `after`/`before` paging). */
export async function listEndpointsPage(sql: Sql, projectId: string, opts: { limit: number; after?: string; before?: string }) {
  const rows = opts.before
    ? (await sql<EndpointRow[]>`
        select ${ENDPOINT_COLUMNS(sql)} from webhook_endpoints where project_id = ${projectId} and id > ${opts.before}
        order by id asc limit ${opts.limit + 1}`).reverse()
    : await sql<EndpointRow[]>`
        select ${ENDPOINT_COLUMNS(sql)} from webhook_endpoints where project_id = ${projectId}
          ${opts.after ? sql`and id < ${opts.after}` : sql``}
        order by id desc limit ${opts.limit + 1}`;
  const hasMore = rows.length > opts.limit;
  return { rows: opts.before ? rows.slice(Math.max(0, rows.length - opts.limit)) : rows.slice(0, opts.limit), hasMore };
}
