import type { CronItem, Task } from 'graphile-worker';
import type { WorkerDeps } from '../interfaces.ts';
import type { Sql } from '../platform/db.ts';

/**
 * Each minute: the reads of what is in flight (ops.stuck, ops.email_pipeline, ops.webhook_health,
 * the overview) trust a sweep for 4 minutes, so one late or missed tick still leaves them reading
 * the partitions swept rather than every day kept.
 */
export const INFLIGHT_SWEEP_CRON: CronItem = {
  task: 'inflight__sweep',
  match: '* * * * *',
  identifier: 'inflight__sweep',
  options: { backfillPeriod: 0, maxAttempts: 1 },
};

/** `inflight__sweep`: records which partitions hold an unsent email or a pending delivery (mailroom_sweep_inflight). */
export function inflightSweepTask(deps: WorkerDeps): Task {
  return async () => {
    await sweepInflight(deps.sql);
  };
}

export async function sweepInflight(sql: Sql): Promise<number> {
  const [row] = await sql<[{ partitions: number }]>`select mailroom_sweep_inflight() as partitions`;
  return row.partitions;
}
