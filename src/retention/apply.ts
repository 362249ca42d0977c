import { setTimeout as sleep } from 'node:timers/promises';
import type { Sql } from '../platform/db.ts';
import {
  dayInFlight, emailPartitions, isLockTimeout, failExpiredUnsent, foldDailyCounts, foldEndpointCounts, pruneRecipientDays, pruneSubmittedMessageIds, purgePartitionBodies,
  removeExpiredEmails, RETENTION_BATCH, retentionCutoffs, withStepLockTimeout,
} from './queries.ts';
import { purgeReceivedBodies, removeExpiredReceived } from '../inbound/retention.ts';
import { keepBroadcastCounts, removeKeptRecipients } from '../broadcasts/retention.ts';
import { DAY_REMOVAL_WAIT_MS, dropPartitionDay, ensurePartitions, partitionDays, unfinishedDays } from './partitions.ts';

export type RetentionSettings = { retentionDays: number; bodyRetentionDays: number };
export type RetentionResult = { emails_removed: number; bodies_purged: number };

const DAY_MS = 86_400_000;
/** How many more times a run tries a day's removal that could not finish, and the pause before each. */
const DROP_RETRIES = 3;
const DROP_RETRY_PAUSE_MS = 200;
/** The least a day's removal is given to wait for the transactions before it, even late in a run. */
const MIN_DAY_REMOVAL_WAIT_MS = 2_000;
/** Broadcasts whose counts one step keeps (each is a read over its emails), and recipient rows one step removes (small rows, by primary key). */
const BROADCAST_BATCH = 20;
const RECIPIENT_BATCH = 5_000;
/** Of a run's time, what removing days leaves to the body purge and the counters (at most a quarter), whatever a day does. */
const PURGE_RESERVE_MS = 5_000;

/**
 * Applies RETENTION_DAYS and BODY_RETENTION_DAYS until nothing is left to do or `untilMs` (a
 * Date.now() value, only a budget: every cutoff comes from the database's clock) has passed;
 * `more` says whether work was left for the next call.
 *
 * First, emails still unsent RETENTION_DAYS after their creation fail (`email.failed`). An email
 * goes with its UTC day of creation, once that whole day lies more than RETENTION_DAYS back and
 * none of the day's emails is unsent and none of its webhook deliveries pending: it is kept between
 * RETENTION_DAYS and RETENTION_DAYS + 1 days. Whole days go as detached and dropped partitions
 * (partitions.ts), a day at a time, first any day an earlier run left unfinished. A day that cannot
 * be detached now (a long transaction, a backup) is left for a later run and delays nothing else:
 * the other days, the purge and the counters go on. Rows left outside a dropped day (the `_before`
 * partition of a migrated database, or rows loaded by hand with an older `created_at`) go in steps
 * of RETENTION_BATCH. Bodies of sent, failed and canceled emails are purged a partition at a time
 * in steps of RETENTION_BATCH, each its own short transaction: whole days past BODY_RETENTION_DAYS
 * entirely, the other partitions by `created_at`. Unsent emails keep everything (§18.5). Each run
 * also makes the partitions of the days ahead.
 */
export async function applyRetention(
  sql: Sql,
  settings: RetentionSettings,
  opts: { untilMs?: number } = {},
): Promise<RetentionResult & { more: boolean }> {
  const { cutoffDay, bodyCutoff } = await retentionCutoffs(sql, settings.retentionDays, settings.bodyRetentionDays);
  const result = { emails_removed: 0, bodies_purged: 0, more: false };
  const timeLeft = () => opts.untilMs === undefined || Date.now() < opts.untilMs;
  const daysUntil = opts.untilMs === undefined ? Infinity : opts.untilMs - Math.min(PURGE_RESERVE_MS, (opts.untilMs - Date.now()) / 4);
  await ensurePartitions(sql);
  // Each step below leaves a table another session locks against writes for a later run.
  const orLater = (err: unknown) => {
    if (!isLockTimeout(err)) throw err;
    result.more = true;
    return 0;
  };
  /**
   * Runs `step` until it does less than a batch (`batch`, RETENTION_BATCH unless given), adding
   * what each did to `counts`; false, with `more` set, when time ran out first.
   */
  const inBatches = async (step: () => Promise<number>, counts?: keyof RetentionResult, batch = RETENTION_BATCH) => {
    for (;;) {
      const done = await step();
      if (counts) result[counts] += done;
      if (done < batch) return true;
      if (!timeLeft()) {
        result.more = true;
        return false;
      }
    }
  };
  if (!await inBatches(() => withStepLockTimeout(sql, (tx) => failExpiredUnsent(tx, settings.retentionDays)).catch(orLater))) return result;
  // A finished broadcast's counts are kept on its row a day before its first emails may go, and
  // its recipients' rows go after (src/broadcasts/retention.ts).
  const broadcastsBefore = new Date(Date.parse(`${cutoffDay}T00:00:00Z`) + DAY_MS);
  if (!await inBatches(() => keepBroadcastCounts(sql, broadcastsBefore, BROADCAST_BATCH), undefined, BROADCAST_BATCH)) return result;
  if (!await inBatches(() => withStepLockTimeout(sql, (tx) => removeKeptRecipients(tx, RECIPIENT_BATCH)).catch(orLater), undefined, RECIPIENT_BATCH)) return result;

  // Days a stopped run left half removed first (whatever the settings now), then the expired ones.
  const unfinished = await unfinishedDays(sql);
  const days = await partitionDays(sql);
  const expired = days.filter((day) => day < cutoffDay && !unfinished.includes(day));
  let stalled = false;
  for (const day of [...unfinished, ...expired]) {
    if (Date.now() >= daysUntil) {
      result.more = true;
      break;
    }
    // Its unsent emails fail first, and their failures reach the webhooks; the day goes after.
    if (!unfinished.includes(day) && await dayInFlight(sql, day)) continue;
    // After a day that could not be detached, the others get one short try each: the same long
    // transaction likely holds them too, and the purge must not wait behind all of them.
    const waitMs = () => Math.max(MIN_DAY_REMOVAL_WAIT_MS, Math.min(stalled ? 0 : DAY_REMOVAL_WAIT_MS, daysUntil - Date.now()));
    let removed = await dropPartitionDay(sql, day, waitMs());
    for (let retry = 0; !stalled && removed === undefined && retry < DROP_RETRIES && Date.now() < daysUntil; retry++) {
      await sleep(DROP_RETRY_PAUSE_MS);
      removed = await dropPartitionDay(sql, day, waitMs());
    }
    // Rows of a day not dropped yet are not removed one by one meanwhile: a later run drops them.
    if (removed === undefined) {
      stalled = true;
      result.more = true;
      continue;
    }
    result.emails_removed += removed;
  }

  const cutoff = new Date(`${cutoffDay}T00:00:00Z`);
  work: {
    const removeRows = () => withStepLockTimeout(sql, (tx) => removeExpiredEmails(tx, cutoff, { daysFrom: days[0] })).catch(orLater);
    if (!await inBatches(removeRows, 'emails_removed')) break work;
    for (const partition of await emailPartitions(sql)) {
      // A day wholly past the cutoff loses every body; another partition those created before it.
      const whole = partition.day !== null && Date.parse(partition.day) + DAY_MS <= bodyCutoff.getTime();
      const purge = () => purgePartitionBodies(sql, partition.name, whole ? undefined : bodyCutoff).catch(orLater);
      if (!await inBatches(purge, 'bodies_purged')) break work;
    }
    // Received emails (§20.8) go by the same settings, counted with the sent ones.
    if (!await inBatches(() => removeExpiredReceived(sql, cutoff, RETENTION_BATCH), 'emails_removed')) break work;
    await inBatches(() => purgeReceivedBodies(sql, bodyCutoff, RETENTION_BATCH), 'bodies_purged');
  }
  await withStepLockTimeout(sql, (tx) => pruneSubmittedMessageIds(tx)).catch(orLater);
  await withStepLockTimeout(sql, (tx) => foldDailyCounts(tx, result.emails_removed > 0)).catch(orLater);
  await withStepLockTimeout(sql, (tx) => foldEndpointCounts(tx)).catch(orLater);
  // The days removed leave the recipient lookup too, a batch a run.
  await withStepLockTimeout(sql, (tx) => pruneRecipientDays(tx)).catch(orLater);
  return result;
}
