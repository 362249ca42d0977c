import { GetAccountCommand } from '@aws-sdk/client-sesv2';
import type { WorkerDeps } from '../interfaces.ts';
import type { Config } from '../platform/config.ts';
import type { Sql } from '../platform/db.ts';
import { checkConnectInput, connectProvider, listConnections, type ConnectInput, type ProviderConnection } from './connections.ts';
import { ServiceError } from '../platform/errors.ts';
import { sesClientFor } from './ses-client.ts';

export type SendQuota = { maxSendRate: number; max24HourSend: number };

/** The account's sending quota, from SES v2 `GetAccount`. */
export async function readSendQuota(config: Config, conn: ProviderConnection): Promise<SendQuota> {
  const account = await sesClientFor(config, conn).send(new GetAccountCommand({}), { abortSignal: AbortSignal.timeout(10_000) });
  const quota = account.SendQuota;
  if (!quota?.MaxSendRate || quota.Max24HourSend === undefined) {
    throw Object.assign(new Error('SES GetAccount answered without a SendQuota'), { name: 'InvalidQuota' });
  }
  return { maxSendRate: quota.MaxSendRate, max24HourSend: quota.Max24HourSend };
}

/** The quota of the account the project's connection is on, shared by every project on it. */
export async function storeSendQuota(sql: Sql, projectId: string, quota: SendQuota) {
  await sql`
    update ses_accounts
    set max_send_rate = ${quota.maxSendRate}, max_24_hour_send = ${quota.max24HourSend}, quota_checked_at = now()
    where id = (select ses_account_id from provider_connections where project_id = ${projectId})`;
}

/** Re-reads every account's quota (once per account); a failing account is logged and keeps its last known one. */
export async function refreshSendQuotas(deps: WorkerDeps) {
  const seen = new Set<string>();
  for (const conn of await listConnections(deps.sql, deps.config, deps.log)) {
    if (seen.has(conn.sesAccountId)) continue;
    seen.add(conn.sesAccountId);
    try {
      await storeSendQuota(deps.sql, conn.projectId, await readSendQuota(deps.config, conn));
    } catch (err) {
      deps.log.warn({ projectId: conn.projectId, err: (err as Error).name }, 'could not read the SES sending quota');
    }
  }
}

/** Re-reads in flight after a throttle, per account: one GetAccount for any number of throttles. */
const rereads = new Map<string, Promise<void>>();

/**
 * SES throttled a send on this account: its `MaxSendRate` may have dropped since it was read, so
 * it is read again now, once however many sends were throttled together. Sends of this process
 * wait for it before taking a slot (`quotaRereadDone`).
 */
export function rereadQuotaAfterThrottle(deps: WorkerDeps, conn: ProviderConnection): Promise<void> {
  const running = rereads.get(conn.sesAccountId);
  if (running) return running;
  const reread = (async () => {
    try {
      const quota = await readSendQuota(deps.config, conn);
      await storeSendQuota(deps.sql, conn.projectId, quota);
      deps.log.info({ projectId: conn.projectId, maxSendRate: quota.maxSendRate }, 'SES quota read again after a throttle');
    } catch (err) {
      deps.log.warn({ projectId: conn.projectId, err: (err as Error).name }, 'could not read the SES sending quota after a throttle');
    } finally {
      rereads.delete(conn.sesAccountId);
    }
  })();
  rereads.set(conn.sesAccountId, reread);
  return reread;
}

/** Waits for a re-read of the account's quota that a throttle started, if one is running. */
export async function quotaRereadDone(accountId: string | undefined) {
  if (accountId) await rereads.get(accountId);
}

/**
 * Connects a project after asking SES for the account's quota with the given keys, so wrong keys
 * or a key without `ses:GetAccount` are refused now rather than at the first send.
 */
export async function connectSesAccount(sql: Sql, config: Config, input: ConnectInput) {
  await checkConnectInput(sql, input);
  const probe: ProviderConnection = {
    projectId: `${input.projectId}#probe`, provider: 'ses', sesAccountId: '', region: input.region, accessKeyId: input.accessKeyId.trim(),
    secretAccessKey: input.secretAccessKey.trim(), configurationSet: null, eventsQueueUrl: null, snsTopicArn: null, updatedAt: new Date(),
  };
  let sendQuota: SendQuota;
  try {
    sendQuota = await readSendQuota(config, probe);
  } catch (err) {
    const e = err as Error & { $metadata?: { httpStatusCode?: number } };
    throw new ServiceError('provider_error', `SES GetAccount failed (${e.name}${e.$metadata?.httpStatusCode ? ` ${e.$metadata.httpStatusCode}` : ''}): check the region and keys, which need ses:GetAccount and ses:SendRawEmail`);
  }
  return connectProvider(sql, config, { ...input, sendQuota });
}
