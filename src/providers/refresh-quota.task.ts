import type { CronItem, Task } from 'graphile-worker';
import type { WorkerDeps } from '../interfaces.ts';
import { refreshSendQuotas } from './quota.ts';

/** SES raises an account's quota as it earns trust; it is re-read every ten minutes. */
export const QUOTA_REFRESH_CRON: CronItem = {
  task: 'provider__refresh_quota',
  match: '*/10 * * * *',
  identifier: 'provider__refresh_quota',
  options: { backfillPeriod: 0 },
};

export function refreshQuotaTask(deps: WorkerDeps): Task {
  return async () => { await refreshSendQuotas(deps); };
}
