import type { Sql } from '../platform/db.ts';

/**
 * Removes entries older than AUDIT_RETENTION_DAYS, whatever RETENTION_DAYS says of emails. The
 * table's trigger refuses every other UPDATE and DELETE; this transaction alone says it is the
 * pruning. Bounded per call so a first run on a large log never holds a long transaction.
 */
export async function pruneAuditLog(sql: Sql, retentionDays: number, batch = 10_000): Promise<number> {
  return sql.begin(async (tx) => {
    await tx`select set_config('mailroom.audit_prune', 'on', true)`;
    const removed = await tx`
      delete from audit_log where id in (
        select id from audit_log where at < now() - make_interval(days => ${retentionDays}) order by at limit ${batch})`;
    return removed.count;
  });
}
