import type { Sql, TxSql } from '../platform/db.ts';
import type { DomainRow, DomainStatus } from './schemas.ts';
import type { IdentityState } from './status.ts';

const DOMAIN_COLUMNS = (sql: Sql | TxSql) => sql`id, project_id, value, region, verification_status, dkim_status, mail_from_status,
  mail_from_domain, dkim_tokens, last_checked_at, created_at`;

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
  sql: Sql,
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
