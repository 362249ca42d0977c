import type { Sql } from '../platform/db.ts';
import { recordAudit } from '../audit/record.ts';
import { addSuppressions, liftSuppression } from './queries.ts';

/**
 * The suppressions a person adds and lifts (the API, the dashboard), each with its audit entry.
 * Bounces, complaints and unsubscribes go through addSuppressions directly: they are the
 * recipients' doing, not a change made by the team.
 */
export async function suppressManually(sql: Sql, projectId: string, address: string): Promise<boolean> {
  return sql.begin(async (tx) => {
    const added = (await addSuppressions(tx, projectId, [address], 'manual')) > 0;
    if (added) await recordAudit(tx, { action: 'suppression.added', projectId, target: { type: 'suppression', id: address }, changes: { address, reason: 'manual' } });
    return added;
  });
}

/** False when the address was not suppressed. */
export async function liftManually(sql: Sql, projectId: string, address: string): Promise<boolean> {
  return sql.begin(async (tx) => {
    const lifted = await liftSuppression(tx, projectId, address);
    if (lifted) await recordAudit(tx, { action: 'suppression.removed', projectId, target: { type: 'suppression', id: address }, changes: { address } });
    return lifted;
  });
}
