import type { Sql } from '../platform/db.ts';
import { foldDailyCounts, purgeExpiredBodies, removeExpiredEmails, RETENTION_BATCH } from './queries.ts';

export type RetentionSettings = { retentionDays: number; bodyRetentionDays: number };
export type RetentionResult = { emails_removed: number; bodies_purged: number };

const DAY_MS = 86_400_000;

/**
 * Applies RETENTION_DAYS and BODY_RETENTION_DAYS in steps of RETENTION_BATCH emails, each its own
 * short transaction, until nothing is left to do or `untilMs` (a Date.now() value) has passed.
 * `more` says whether work was left for the next call.
 */
export async function applyRetention(
  sql: Sql,
  settings: RetentionSettings,
  opts: { untilMs?: number; now?: Date } = {},
): Promise<RetentionResult & { more: boolean }> {
  const now = (opts.now ?? new Date()).getTime();
  const cutoff = new Date(now - settings.retentionDays * DAY_MS);
  const bodyCutoff = new Date(now - settings.bodyRetentionDays * DAY_MS);
  const result = { emails_removed: 0, bodies_purged: 0, more: false };
  const timeLeft = () => opts.untilMs === undefined || Date.now() < opts.untilMs;
  for (;;) {
    const removed = await removeExpiredEmails(sql, cutoff);
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
  await foldDailyCounts(sql, result.emails_removed > 0);
  return result;
}
