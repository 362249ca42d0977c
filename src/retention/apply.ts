import { setTimeout as sleep } from 'node:timers/promises';
import type { Sql } from '../platform/db.ts';
import { emailPartitions, foldDailyCounts, pruneSubmittedMessageIds, purgePartitionBodies, removeExpiredEmails, RETENTION_BATCH } from './queries.ts';
import { purgeReceivedBodies, removeExpiredReceived } from '../inbound/retention.ts';
import { DAY_REMOVAL_WAIT_MS, dropPartitionDay, ensurePartitions, partitionDays, unfinishedDays } from './partitions.ts';

export type RetentionSettings = { retentionDays: number; bodyRetentionDays: number };
export type RetentionResult = { emails_removed: number; bodies_purged: number };

const DAY_MS = 86_400_000;
/** How many more times a run tries a day's removal that could not finish, and the pause before each. */
const DROP_RETRIES = 3;
const DROP_RETRY_PAUSE_MS = 200;
/** The least a day's removal is given to wait for the transactions before it, even late in a run. */
const MIN_DAY_REMOVAL_WAIT_MS = 2_000;

/**
 * Applies RETENTION_DAYS and BODY_RETENTION_DAYS until nothing is left to do or `untilMs` (a
 * Date.now() value) has passed; `more` says whether work was left for the next call.
 *
 * An email goes with its UTC day of creation, once that whole day lies more than RETENTION_DAYS
 * back: it is kept between RETENTION_DAYS and RETENTION_DAYS + 1 days. Whole days go as detached
 * and dropped partitions (partitions.ts), a day at a time, first any day an earlier run left
 * unfinished; rows left outside a dropped day (the `_before` partition of a migrated database, or
 * rows loaded by hand with an older `created_at`) go in steps of RETENTION_BATCH. Bodies are purged
 * a partition at a time in steps of RETENTION_BATCH, each its own short transaction: whole days past
 * BODY_RETENTION_DAYS entirely, the other partitions by `created_at`. Each run also makes the
 * partitions of the days ahead.
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
  // Days a stopped run left half removed first (whatever the settings now), then the expired ones.
  const unfinished = await unfinishedDays(sql);
  const expired = (await partitionDays(sql)).filter((day) => day < cutoffDay && !unfinished.includes(day));
  for (const day of [...unfinished, ...expired]) {
    const waitMs = () => Math.max(MIN_DAY_REMOVAL_WAIT_MS, Math.min(DAY_REMOVAL_WAIT_MS, (opts.untilMs ?? Infinity) - Date.now()));
    let removed = await dropPartitionDay(sql, day, waitMs());
    // A transaction longer than the wait (a long report), or a lock on the tables' projects or
    // endpoints held a moment: the day is tried again a few times before it is left for the next run.
    for (let retry = 0; removed === undefined && retry < DROP_RETRIES && timeLeft(); retry++) {
      await sleep(DROP_RETRY_PAUSE_MS);
      removed = await dropPartitionDay(sql, day, waitMs());
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
  for (const partition of await emailPartitions(sql)) {
    // A day wholly past the cutoff loses every body; another partition those created before it.
    const whole = partition.day !== null && Date.parse(partition.day) + DAY_MS <= bodyCutoff.getTime();
    for (;;) {
      const purged = await purgePartitionBodies(sql, partition.name, whole ? undefined : bodyCutoff);
      result.bodies_purged += purged;
      if (purged < RETENTION_BATCH) break;
      if (!timeLeft()) return { ...result, more: true };
    }
  }
  // Received emails (§20.8) go by the same settings, counted with the sent ones.
  for (;;) {
    const removed = await removeExpiredReceived(sql, new Date(`${cutoffDay}T00:00:00Z`), RETENTION_BATCH);
    result.emails_removed += removed;
    if (removed < RETENTION_BATCH) break;
    if (!timeLeft()) return { ...result, more: true };
  }
  for (;;) {
    const purged = await purgeReceivedBodies(sql, bodyCutoff, RETENTION_BATCH);
    result.bodies_purged += purged;
    if (purged < RETENTION_BATCH) break;
    if (!timeLeft()) return { ...result, more: true };
  }
  await pruneSubmittedMessageIds(sql);
  await foldDailyCounts(sql, result.emails_removed > 0);
  return result;
}
