import type { CronItem, Task } from 'graphile-worker';
import type { Sql } from './db.ts';
import type { Logger } from './log.ts';

/** Idempotency keys are honoured for 24 h; SNS redelivers for at most a few days. */
const IDEMPOTENCY_TTL = '24 hours';
const SNS_MESSAGE_TTL = '14 days';

export const PRUNE_CRON: CronItem = {
  task: 'maintenance__prune',
  match: '17 * * * *',
  identifier: 'maintenance__prune',
  options: { backfillPeriod: 0 },
};

/** Hourly housekeeping of rows that only matter for a bounded time (keys, SNS ids, sessions). Safe to run twice. */
export function pruneTask(deps: { sql: Sql; log: Logger }): Task {
  return async () => {
    const keys = await deps.sql`
      delete from idempotency_keys where created_at < now() - ${IDEMPOTENCY_TTL}::interval`;
    const sns = await deps.sql`
      delete from sns_messages where received_at < now() - ${SNS_MESSAGE_TTL}::interval`;
    const sessions = await deps.sql`delete from dashboard_sessions where expires_at < now()`;
    // Throttles only matter for the last hour, which ops.providers counts.
    await deps.sql`delete from provider_throttles where throttled_at < now() - interval '1 day'`;
    if (keys.count || sns.count || sessions.count) {
      deps.log.info({ idempotencyKeys: keys.count, snsMessages: sns.count, dashboardSessions: sessions.count }, 'pruned expired rows');
    }
  };
}
