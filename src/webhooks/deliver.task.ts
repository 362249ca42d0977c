import type { Task } from 'graphile-worker';
import { z } from 'zod';
import type { Sql } from '../platform/db.ts';
import { GroupCommit, groupCommitPerPool } from '../platform/group-commit.ts';
import { createAttempter, loadAttempts, type AttemptDeps, type AttemptKey } from './attempt.ts';

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
 * `webhook__deliver`: one attempt of one delivery, for its retries (first attempts go in their
 * endpoint's `webhook__flush`). Safe to run twice. A delivery a flush holds is left to it.
 */
export function webhookDeliverTask(deps: AttemptDeps): Task {
  const attempter = createAttempter(deps);
  return async (raw) => {
    const payload = Payload.parse(raw);
    const a = await loadAttempt(deps.sql, payload.project_id, payload.delivery_id);
    if (!a || a.status !== 'pending' || a.leased) return;
    await (await attempter.attempt(a)).settled;
  };
}
