import type { Task } from 'graphile-worker';
import { z } from 'zod';
import type { Sql } from '../platform/db.ts';
import { GroupCommit, groupCommitPerPool } from '../platform/group-commit.ts';
import { createAttempter, loadAttempts, type AttemptDeps, type AttemptKey } from './attempt.ts';
import { flushJob } from './queries.ts';

const Payload = z.object({ delivery_id: z.string().min(1), project_id: z.string().min(1) });

/**
 * Deliveries starting together load in one query: jobs arrive in batches from the local queue,
 * and on loopback each round trip costs more CPU than the lookup itself. Nothing is kept once
 * the query answers, so each attempt reads the delivery as it is when the attempt starts.
 */
const attemptLoaderFor = groupCommitPerPool((sql) => new GroupCommit((keys: AttemptKey[]) => loadAttempts(sql, keys), { maxInFlight: 2 }));

function loadAttempt(sql: Sql, projectId: string, deliveryId: string) {
  return attemptLoaderFor(sql).run({ projectId, deliveryId });
}

/** How many attempt-loading queries this process has made, for the test that checks they are shared. */
export function attemptLoadQueries(sql: Sql): number {
  return attemptLoaderFor(sql).batchesWritten;
}

/**
 * `webhook__deliver`: one retry of one delivery. Safe to run twice. First attempts are their
 * endpoint's `webhook__flush`'s: a job for a delivery never attempted (one queued before flushes
 * took first attempts over) hands it to that flush, so the two never both send it.
 */
export function webhookDeliverTask(deps: AttemptDeps): Task {
  const attempter = createAttempter(deps);
  return async (raw) => {
    const payload = Payload.parse(raw);
    const a = await loadAttempt(deps.sql, payload.project_id, payload.delivery_id);
    if (!a || a.status !== 'pending' || a.leased) return;
    if (a.attemptCount === 0) {
      await deps.sql`select ${flushJob(deps.sql, a.endpointId, a.projectId)}`;
      return;
    }
    await (await attempter.attempt(a)).settled;
  };
}
