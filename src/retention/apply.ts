import { setTimeout as sleep } from 'node:timers/promises';
import type { Sql } from '../platform/db.ts';
import { foldDailyCounts, pruneSubmittedMessageIds, purgeExpiredBodies, removeExpiredEmails, RETENTION_BATCH } from './queries.ts';
import { dropPartitionDay, ensurePartitions, partitionDays } from './partitions.ts';

export type RetentionSettings = { retentionDays: number; bodyRetentionDays: number };
export type RetentionResult = { emails_removed: number; bodies_purged: number };

const DAY_MS = 86_400_000;
/** How many more times a run tries a day's drop that could not have its locks, and the pause before each. */
const DROP_RETRIES = 10;
const DROP_RETRY_PAUSE_MS = 200;

/**
 * Applies RETENTION_DAYS and BODY_RETENTION_DAYS until nothing is left to do or `untilMs` (a
 * Date.now() value) has passed; `more` says whether work was left for the next call.
 *
 * An email goes with its UTC day of creation, once that whole day lies more than RETENTION_DAYS
 * back: it is kept between RETENTION_DAYS and RETENTION_DAYS + 1 days. Whole days go as dropped
 * partitions (partitions.ts), one transaction a day; rows left outside a dropped day (the
 * `_before` partition of a migrated database, or rows loaded by hand with an older `created_at`)
 * go in steps of RETENTION_BATCH. Bodies are purged in steps of RETENTION_BATCH, each its own
 * short transaction. Each run also makes the partitions of the days ahead.
 */
export async function applyRetention(
  sql: Sql,
  settings: RetentionSettings,
  opts: { untilMs?: number; now?: Date } = {},
): Promise<RetentionResult & { more: boolean }> {
  const now = opts.now ?? new Date();
  const cutoffDay = new Date(now.getTime() - settings.retentionDays * DAY_MS).toISOString().slice(0, 10);
  const bodyCutoff = new Date(now.getTime() - settings.bodyRetentionDays * DAY_MS);
  const result = { emails_removed: 0, bodies_purged: 0, more: false };
  const timeLeft = () => opts.untilMs === undefined || Date.now() < opts.untilMs;
  await ensurePartitions(sql);
  for (const day of await partitionDays(sql)) {
    if (day >= cutoffDay) break;
    let removed = await dropPartitionDay(sql, day);
    // A lock held a moment longer than the timeout (a long read, autovacuum on the old partition):
    // the day is tried again a few times, pausing between, before it is left for the next run.
    for (let retry = 0; removed === undefined && retry < DROP_RETRIES && timeLeft(); retry++) {
      await sleep(DROP_RETRY_PAUSE_MS);
      removed = await dropPartitionDay(sql, day);
    }
    // Rows of a day not dropped yet are not removed one by one meanwhile: the next run drops them.
    if (removed === undefined) return { ...result, more: true };
    result.emails_removed += removed;
    if (!timeLeft()) return { ...result, more: true };
  }
  for (;;) {
    const removed = await removeExpiredEmails(sql, new Date(`${cutoffDay}T00:00:00Z`));
    result.emails_removed += removed;
    if (removed < RETENTION_BATCH) break;
    if (!timeLeft()) return { ...result, more: true };
  }
  for (;;) {
    const purged = await purgeExpiredBodies(sql, bodyCutoff);
    result.bodies_purged += purged;
    if (purged < RETENTION_BATCH) break;
    if (!timeLeft()) return { ...result, more: true };
  }
  await pruneSubmittedMessageIds(sql);
  await foldDailyCounts(sql, result.emails_removed > 0);
  return result;
}
