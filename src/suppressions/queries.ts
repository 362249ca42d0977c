import type { Sql, TxSql } from '../platform/db.ts';
import { normaliseAddress } from './address.ts';

export type SuppressionReason = 'bounced' | 'complained' | 'unsubscribed' | 'manual';

/**
 * Puts recipients on the project's suppression list. Addresses may carry display names; they
 * are stored bare and lower-cased. An address already suppressed keeps its first reason, so a
 * later bounce never rewrites an unsubscribe. Returns how many addresses were new.
 */
export async function addSuppressions(
  tx: Sql | TxSql,
  projectId: string,
  addresses: string[],
  reason: SuppressionReason,
  emailId: string | null = null,
): Promise<number> {
  const unique = [...new Set(addresses.map(normaliseAddress).filter(Boolean))];
  if (unique.length === 0) return 0;
  const rows = await tx`
    insert into suppressions (project_id, address, reason, email_id)
    select ${projectId}, address, ${reason}, ${emailId}
    from unnest(${unique}::text[]) as address
    on conflict (project_id, address) do nothing
    returning address`;
  return rows.length;
}

/** Which of these recipients are suppressed in the project, as normalised addresses. */
export async function suppressedAmong(sql: Sql | TxSql, projectId: string, recipients: string[]): Promise<Set<string>> {
  const wanted = [...new Set(recipients.map(normaliseAddress))];
  if (wanted.length === 0) return new Set();
  const rows = await sql<{ address: string }[]>`
    select address from suppressions
    where project_id = ${projectId} and address = any(${wanted}::text[])`;
  return new Set(rows.map((r) => r.address));
}

export type Suppression = { address: string; reason: SuppressionReason; emailId: string | null; createdAt: Date };

/**
 * The project's suppression list, newest first (ties by address), paged after the entry of
 * `startingAfter`, optionally only `address`. Fetches one extra row to answer has_more.
 */
export async function listSuppressions(
  sql: Sql | TxSql,
  projectId: string,
  opts: { limit: number; startingAfter?: string; address?: string } = { limit: 100 },
) {
  // The cursor row is compared in SQL: its created_at has microseconds a JS Date would drop.
  const rows = await sql<Suppression[]>`
    select address, reason, email_id, created_at from suppressions
    where project_id = ${projectId}
      ${opts.address ? sql`and address = ${opts.address}` : sql``}
      ${opts.startingAfter ? sql`and (created_at, address) < (
        select created_at, address from suppressions where project_id = ${projectId} and address = ${opts.startingAfter})` : sql``}
    order by created_at desc, address desc
    limit ${opts.limit + 1}`;
  return { rows: rows.slice(0, opts.limit), hasMore: rows.length > opts.limit };
}

export async function getSuppression(sql: Sql | TxSql, projectId: string, address: string) {
  const [row] = await sql<[Suppression?]>`
    select address, reason, email_id, created_at from suppressions
    where project_id = ${projectId} and address = ${address}`;
  return row;
}

/** Lifts one entry; false when it was not there. */
export async function liftSuppression(sql: Sql | TxSql, projectId: string, address: string): Promise<boolean> {
  const result = await sql`delete from suppressions where project_id = ${projectId} and address = ${address}`;
  return result.count > 0;
}
