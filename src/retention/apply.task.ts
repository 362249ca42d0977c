import type { CronItem, Task } from 'graphile-worker';
import type { WorkerDeps } from '../interfaces.ts';
import { applyRetention } from './apply.ts';

/** Every minute, so each run has about a minute's worth of history to remove: small steps. */
export const RETENTION_CRON: CronItem = {
  task: 'retention__apply',
  match: '* * * * *',
  identifier: 'retention__apply',
  options: { backfillPeriod: 0, maxAttempts: 1 },
};

/** How long one run keeps taking steps; what is left waits for the next minute's run. */
const RUN_BUDGET_MS = 20_000;

/** `retention__apply`: removes expired emails and purges expired bodies, a step at a time. */
export function retentionApplyTask(deps: WorkerDeps): Task {
  return async () => {
    const result = await applyRetention(deps.sql, deps.config, { untilMs: Date.now() + RUN_BUDGET_MS });
    if (result.emails_removed || result.bodies_purged) {
      deps.log.info({ emailsRemoved: result.emails_removed, bodiesPurged: result.bodies_purged, more: result.more }, 'retention applied');
    }
  };
}
