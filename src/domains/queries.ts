import type { Sql, TxSql } from '../platform/db.ts';
import type { DomainRow, DomainStatus } from './schemas.ts';
import type { IdentityState } from './status.ts';

const DOMAIN_COLUMNS = (sql: Sql | TxSql) => sql`id, project_id, value, region, verification_status, dkim_status, mail_from_status,
  mail_from_domain, dkim_tokens, last_checked_at, open_tracking, click_tracking, tracking_domain, receiving, created_at`;

export async function listDomains(sql: Sql, projectId: string) {
  return sql<DomainRow[]>`
    select ${DOMAIN_COLUMNS(sql)} from domains where project_id = ${projectId} order by id`;
}

export async function findDomain(sql: Sql | TxSql, projectId: string, id: string) {
  const [row] = await sql<[DomainRow?]>`
    select ${DOMAIN_COLUMNS(sql)} from domains where id = ${id} and project_id = ${projectId}`;
  return row;
}

/** The owning project of a domain id, for operator commands that name only the id. */
export async function findDomainProject(sql: Sql, id: string) {
  const [row] = await sql<[{ projectId: string }?]>`select project_id from domains where id = ${id}`;
  return row?.projectId;
}

export async function domainExists(sql: Sql, projectId: string, value: string) {
  const [row] = await sql`select 1 from domains where project_id = ${projectId} and value = ${value}`;
  return Boolean(row);
}

export async function insertDomain(
  sql: Sql | TxSql,
  d: { id: string; projectId: string; value: string; region: string; checked: boolean } & IdentityState,
) {
  const [row] = await sql<[DomainRow]>`
    insert into domains (id, project_id, value, region, verification_status, dkim_status, mail_from_status,
      mail_from_domain, dkim_tokens, last_checked_at)
    values (${d.id}, ${d.projectId}, ${d.value}, ${d.region}, ${d.verificationStatus}, ${d.dkimStatus},
      ${d.mailFromStatus}, ${d.mailFromDomain}, ${d.dkimTokens}::text[], ${d.checked ? sql`now()` : null})
    returning ${DOMAIN_COLUMNS(sql)}`;
  return row;
}

export type StatusChange = { at: string; field: string; from: DomainStatus | null; to: DomainStatus | null };

/** Stores a check's answer; `changes` (possibly none) are appended to status_history. */
export async function recordCheck(tx: TxSql, projectId: string, id: string, state: IdentityState, changes: StatusChange[]) {
  await tx`
    update domains set
      verification_status = ${state.verificationStatus},
      dkim_status = ${state.dkimStatus},
      mail_from_status = ${state.mailFromStatus},
      mail_from_domain = ${state.mailFromDomain},
      dkim_tokens = ${state.dkimTokens}::text[],
      last_checked_at = now(),
      status_history = status_history || ${tx.json(changes)}::jsonb,
      status_changed_at = case when ${changes.length > 0} then now() else status_changed_at end
    where id = ${id} and project_id = ${projectId}`;
}

/** The domain's tracking host, for a send that switches tracking on; undefined when none is set. */
export async function trackingDomainOf(sql: Sql, projectId: string, value: string) {
  const [row] = await sql<[{ trackingDomain: string | null }?]>`
    select tracking_domain from domains where project_id = ${projectId} and value = ${value}`;
  return row?.trackingDomain ?? undefined;
}

/** Why a host may not be a project's tracking domain; `parent` names the unverified domain it is under. */
export type TrackingDomainRefusal = { why: 'not_own' | 'taken' } | { why: 'unverified'; parent: string; status: string };

/**
 * Why a project may not use `host` as a tracking domain (§18.11, §22.11), or undefined when it
 * may: it must be a subdomain of one of the project's own domains whose verification_status is
 * `success`, and no other project's. Takes a transaction lock on the host name, so two projects
 * claiming one at once are told apart.
 */
export async function trackingDomainRefusal(tx: TxSql, projectId: string, host: string): Promise<TrackingDomainRefusal | undefined> {
  await tx`select pg_advisory_xact_lock(hashtext(${`mailroom: tracking domain ${host}`}))`;
  const [row] = await tx<[{ parent: string | null; status: string | null; verified: boolean; taken: boolean }]>`
    with under as (select value, verification_status from domains where project_id = ${projectId} and right(${host}, length(value) + 1) = '.' || value)
    select (select value from under order by length(value) desc limit 1) as parent,
           (select verification_status from under order by length(value) desc limit 1) as status,
           exists (select 1 from under where verification_status = 'success') as verified,
           exists (select 1 from domains where tracking_domain = ${host} and project_id <> ${projectId}) as taken`;
  if (row.parent === null) return { why: 'not_own' };
  if (!row.verified) return { why: 'unverified', parent: row.parent, status: row.status ?? 'pending' };
  return row.taken ? { why: 'taken' } : undefined;
}

export type TrackingChange = { openTracking?: boolean; clickTracking?: boolean; trackingDomain?: string | null };

/**
 * Changes the tracking switches given, leaving the others as they are. Nothing changes (undefined)
 * when the result would have a switch on with no base for its links: no tracking domain and
 * `hasBaseUrl` false. The check reads the row being updated, so two edits at once cannot combine
 * into such a state.
 */
export async function updateTracking(sql: Sql | TxSql, projectId: string, id: string, change: TrackingChange, hasBaseUrl: boolean) {
  const open = sql`coalesce(${change.openTracking ?? null}::boolean, open_tracking)`;
  const click = sql`coalesce(${change.clickTracking ?? null}::boolean, click_tracking)`;
  const host = change.trackingDomain === undefined ? sql`tracking_domain` : sql`${change.trackingDomain}::text`;
  const [row] = await sql<[DomainRow?]>`
    update domains set open_tracking = ${open}, click_tracking = ${click}, tracking_domain = ${host}
    where id = ${id} and project_id = ${projectId}
      and (${hasBaseUrl} or ${host} is not null or not (${open} or ${click}))
    returning ${DOMAIN_COLUMNS(sql)}`;
  return row;
}

/**
 * A page of the project's domains, newest first (Resend's `after`/`before` paging): `after` the
 * older ones past a cursor, `before` the newer ones.
 */
export async function listDomainsPage(sql: Sql, projectId: string, opts: { limit: number; after?: string; before?: string }) {
  const rows = opts.before
    ? (await sql<DomainRow[]>`
        select ${DOMAIN_COLUMNS(sql)} from domains where project_id = ${projectId} and id > ${opts.before}
        order by id asc limit ${opts.limit + 1}`).reverse()
    : await sql<DomainRow[]>`
        select ${DOMAIN_COLUMNS(sql)} from domains where project_id = ${projectId}
          ${opts.after ? sql`and id < ${opts.after}` : sql``}
        order by id desc limit ${opts.limit + 1}`;
  const hasMore = rows.length > opts.limit;
  return { rows: opts.before ? rows.slice(Math.max(0, rows.length - opts.limit)) : rows.slice(0, opts.limit), hasMore };
}
