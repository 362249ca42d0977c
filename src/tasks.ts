import type { CronItem, TaskList } from 'graphile-worker';
import type { WorkerDeps } from './interfaces.ts';
import { domainCheckTask } from './domains/check.task.ts';
import { DOMAIN_RECHECK_CRON, domainRecheckTask } from './domains/recheck.task.ts';
import { emailSendTask } from './emails/send.task.ts';
import { ORPHAN_SWEEP_CRON, orphanSweepTask } from './emails/orphans.task.ts';
import { broadcastSendTask } from './broadcasts/send.task.ts';
import { htmlForSending } from './tracking/service.ts';
import { PRUNE_CRON, pruneTask } from './platform/prune.task.ts';
import { RETENTION_CRON, retentionApplyTask } from './retention/apply.task.ts';
import { ensurePartitions } from './retention/partitions.ts';
import { INFLIGHT_SWEEP_CRON, inflightSweepTask } from './retention/inflight.task.ts';
import { QUOTA_REFRESH_CRON, refreshQuotaTask } from './providers/refresh-quota.task.ts';
import { followThrottles } from './providers/pacing.ts';
import { startSqsPolling } from './events/sqs-poll.ts';
import { startSinkServer } from './sink/server.ts';
import { closeSinkTransports } from './providers/sink-transport.ts';
import { webhookDeliverTask } from './webhooks/deliver.task.ts';
import { webhookFlushTask } from './webhooks/flush.task.ts';
import { accountReadTask, REPUTATION_CHECK_CRON, reputationCheckTask } from './reputation/check.task.ts';
import { contactsImportRunTask } from './contacts/imports/run.task.ts';

/** Every graphile-worker task, named `noun__verb`, one file each in its capability folder. */
export function buildTaskList(deps: WorkerDeps): TaskList {
  return {
    contacts_import__run: contactsImportRunTask(deps),
    broadcast__send: broadcastSendTask(deps),
    domain__check: domainCheckTask(deps),
    domain__recheck: domainRecheckTask(deps),
    // Tracking rewrites the HTML at send time; handed in here so sending never imports tracking.
    email__send: emailSendTask(deps, htmlForSending(deps)),
    email__requeue_orphans: orphanSweepTask(deps),
    inflight__sweep: inflightSweepTask(deps),
    maintenance__prune: pruneTask(deps),
    provider__refresh_quota: refreshQuotaTask(deps),
    reputation__check: reputationCheckTask(deps),
    reputation__read_account: accountReadTask(deps),
    retention__apply: retentionApplyTask(deps),
    webhook__deliver: webhookDeliverTask(deps),
    webhook__flush: webhookFlushTask(deps),
  };
}

export function buildCrontab(_deps: WorkerDeps): CronItem[] {
  return [DOMAIN_RECHECK_CRON, INFLIGHT_SWEEP_CRON, ORPHAN_SWEEP_CRON, PRUNE_CRON, QUOTA_REFRESH_CRON, REPUTATION_CHECK_CRON, RETENTION_CRON];
}

/** Long-running services the worker process hosts besides jobs (the SMTP sink, queue polling). */
export async function startWorkerServices(deps: WorkerDeps): Promise<Array<[string, () => Promise<unknown>]>> {
  const services: Array<[string, () => Promise<unknown>]> = [];
  // Today's partitions and the next days', before any send; the retention job keeps them ahead.
  await ensurePartitions(deps.sql);
  if (deps.config.eventIngestion === 'queue') {
    const polling = await startSqsPolling(deps);
    services.push(['sqs-poll', () => polling.close()]);
  }
  // Throttles other processes meet make this one drop the send slots it holds (§16.2).
  const throttles = await followThrottles(deps.sql);
  services.push(['ses-throttles', () => throttles.unlisten()]);
  // The sink runs beside the jobs that hand it mail; the transport reads the bound address.
  const sink = await startSinkServer(deps);
  services.push(['smtp-sink', async () => { closeSinkTransports(); await sink.close(); }]);
  return services;
}
