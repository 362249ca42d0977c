import type { Sql } from '../platform/db.ts';
import { GroupCommit, groupCommitPerPool, type Arrival } from '../platform/group-commit.ts';
import { emailExists, insertQueuedEmails, type NewEmail } from './queries.ts';
import { withDayPartitions } from '../retention/partitions.ts';

/**
 * Records a queued email and its job, sharing the transaction with the sends accepted at the same
 * moment. Resolves with the id only once the row is committed.
 */
export function acceptQueued(sql: Sql, email: NewEmail, arrival?: Arrival): Promise<string> {
  return committerFor(sql).run(email, arrival);
}

/**
 * Announces an email that will reach acceptQueued within a few milliseconds (an SMTP message
 * whose content is arriving), so the transaction about to start can wait for it.
 */
export function announceQueued(sql: Sql): Arrival {
  return committerFor(sql).announce();
}

const committerFor = groupCommitPerPool((sql) => new GroupCommit<NewEmail, string>(
  async (emails) => {
    await withDayPartitions(sql, emails.map((e) => e.id), () => insertQueuedEmails(sql, emails));
    return emails.map((e) => e.id);
  },
  // Up to four batches in flight: at 32 connections, p99 fell from about 27 to 24 ms against two.
  // But a batch beside another only once 8 wait: each transaction pays add_jobs's fixed cost (about
  // 0.85 ms of PostgreSQL whatever its size). For the same reason a batch waits up to 2 ms for the
  // relay's messages whose content is arriving: an SMTP connection has one message in flight, so 8
  // connections made batches of three or four; waiting, the eight share one (docs/benchmarks.md).
  // Accept at 32 connections announces nothing and is unchanged by either.
  { maxInFlight: 4, minToOverlap: 8, maxArrivalWaitMs: 2 },
  (email) => writeAlone(sql, email),
));

/**
 * One email in its own transaction, after its batch failed. If the batch's commit went through
 * but its answer was lost with the connection, the row is already there: that is a success.
 */
async function writeAlone(sql: Sql, email: NewEmail): Promise<string> {
  try {
    await withDayPartitions(sql, [email.id], () => insertQueuedEmails(sql, [email]));
  } catch (err) {
    if (await emailExists(sql, email.projectId, email.id).catch(() => false)) return email.id;
    throw err;
  }
  return email.id;
}

/** Batch sizes written lately, for the benchmarks. */
export function recentBatchSizes(sql: Sql): number[] {
  return committerFor(sql).recentSizes;
}
