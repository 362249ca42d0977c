import type { Sql, TxSql } from '../platform/db.ts';
import { broadcastCounts, broadcastsToKeep } from './queries.ts';

/**
 * Retention (RETENTION_DAYS) for broadcasts. A broadcast's emails go with their days like any
 * email; what it knows about its recipients (a row per contact, with the address) goes with them,
 * and its counts would go too, since most are read from those emails. So a finished broadcast
 * (`sent` or `canceled`) whose first emails are within a day of being removed has its counts
 * kept on its row first, read one last time; then its recipients' rows are removed, a step at a
 * time. The broadcast itself (name, content, segment, topic, times and kept counts) stays, as
 * templates and domains do.
 */

/**
 * Keeps the counts of up to `batch` finished broadcasts that began before `before`, each in its
 * own statement, oldest first. Returns how many it kept.
 */
export async function keepBroadcastCounts(sql: Sql, before: Date, batch: number): Promise<number> {
  const due = await broadcastsToKeep(sql, before, batch);
  for (const b of due) {
    const counts = await broadcastCounts(sql, b);
    // Its counters are read no more once the counts are on its row.
    await sql`
      with kept as (
        update broadcasts set counts_kept = ${sql.json(counts)}, updated_at = now()
        where id = ${b.id} and project_id = ${b.projectId} and counts_kept is null
        returning id, project_id)
      delete from broadcast_counts c using kept k where c.broadcast_id = k.id and c.project_id = k.project_id`;
  }
  return due.length;
}

/**
 * Removes up to `batch` recipient rows of broadcasts whose counts are kept, in one statement
 * (rows another transaction holds are skipped). Returns how many went.
 */
export async function removeKeptRecipients(sql: Sql | TxSql, batch: number): Promise<number> {
  const [row] = await sql<[{ removed: number }]>`
    with doomed as (
      select r.broadcast_id, r.contact_id from broadcasts b
      join broadcast_recipients r on r.broadcast_id = b.id and r.project_id = b.project_id
      where b.counts_kept is not null
      limit ${batch}
      for update of r skip locked),
    gone as (
      delete from broadcast_recipients r using doomed d
      where r.broadcast_id = d.broadcast_id and r.contact_id = d.contact_id
      returning 1)
    select count(*)::int as removed from gone`;
  return row.removed;
}
