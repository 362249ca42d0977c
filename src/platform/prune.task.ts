import type { CronItem, Task } from 'graphile-worker';
import type { Sql } from './db.ts';
import type { Logger } from './log.ts';
import { pruneAuditLog } from '../audit/prune.ts';

/** Idempotency keys are honoured for 24 h; SNS redelivers for at most a few days. */
const IDEMPOTENCY_TTL = '24 hours';
const SNS_MESSAGE_TTL = '14 days';

export const PRUNE_CRON: CronItem = {
  task: 'maintenance__prune',
  match: '17 * * * *',
  identifier: 'maintenance__prune',
  options: { backfillPeriod: 0 },
};

/** Hourly housekeeping of rows that only matter for a bounded time (keys, SNS ids, sessions, audit entries). Safe to run twice. */
export function pruneTask(deps: { sql: Sql; log: Logger; config: { auditRetentionDays: number } }): Task {
  return async () => {
    const keys = await deps.sql`
      delete from idempotency_keys where created_at < now() - ${IDEMPOTENCY_TTL}::interval`;
    const sns = await deps.sql`
      delete from sns_messages where received_at < now() - ${SNS_MESSAGE_TTL}::interval`;
    const sessions = await deps.sql`delete from dashboard_sessions where expires_at < now()`;
    // Throttles only matter for the last hour, which ops.providers counts.
    await deps.sql`delete from provider_throttles where throttled_at < now() - interval '1 day'`;
    // A bounded number of bounded steps an hour: a large first backlog goes over a few runs.
    let audit = 0;
    for (let step = 0, removed = -1; step < 10 && removed !== 0; step++) audit += removed = await pruneAuditLog(deps.sql, deps.config.auditRetentionDays);
    if (audit) deps.log.info({ auditEntries: audit }, 'pruned audit entries past AUDIT_RETENTION_DAYS');
    if (keys.count || sns.count || sessions.count) {
      deps.log.info({ idempotencyKeys: keys.count, snsMessages: sns.count, dashboardSessions: sessions.count }, 'pruned expired rows');
    }
  };
}
