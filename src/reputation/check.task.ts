import type { CronItem, Task } from 'graphile-worker';
import { GetAccountCommand } from '@aws-sdk/client-sesv2';
import type { WorkerDeps } from '../interfaces.ts';
import { listConnections, type ProviderConnection } from '../providers/connections.ts';
import { sesClientFor } from '../providers/ses-client.ts';
import { recordProjectEvent } from '../events/record.ts';
import { evaluateAll } from './evaluate.ts';
import { foldCounters, pauseProjects, projectsOnAccount, stampPause } from './queries.ts';
import './metrics.ts';

/**
 * Every minute: SES's view of each connected account is read when the last reading is older
 * than ACCOUNT_READ_EVERY (so at least every 5 minutes, §19.5), and every running project's
 * windows are evaluated again (the events evaluate them as they arrive; this catches a window
 * that crossed through another project's events, or a threshold lowered meanwhile).
 */
export const REPUTATION_CHECK_CRON: CronItem = {
  task: 'reputation__check',
  match: '* * * * *',
  identifier: 'reputation__check',
  options: { backfillPeriod: 0 },
};

/** Under 5 minutes, so a cron tick a little late still reads every account within 5 minutes. */
const ACCOUNT_READ_EVERY = '4 minutes';

type AccountReading = { enforcementStatus: string | null; sendingEnabled: boolean };

async function readAccount(deps: WorkerDeps, conn: ProviderConnection): Promise<AccountReading> {
  const account = await sesClientFor(deps.config, conn).send(new GetAccountCommand({}), { abortSignal: AbortSignal.timeout(10_000) });
  return { enforcementStatus: account.EnforcementStatus ?? null, sendingEnabled: account.SendingEnabled !== false };
}

/**
 * Stores what SES said of the account. A changed EnforcementStatus is told to every project on
 * it (`account.enforcement_changed`); sending disabled pauses them all (`aws_sending_disabled`),
 * rather than letting every send fail one by one. One transaction.
 */
export async function applyAccountReading(deps: WorkerDeps, conn: ProviderConnection, reading: AccountReading) {
  await deps.sql.begin(async (tx) => {
    const [before] = await tx<[{ enforcementStatus: string | null }?]>`
      select enforcement_status from ses_accounts where id = ${conn.sesAccountId} for update`;
    await tx`
      update ses_accounts set enforcement_status = ${reading.enforcementStatus}, sending_enabled = ${reading.sendingEnabled},
        account_checked_at = now()
      where id = ${conn.sesAccountId}`;
    const projects = await projectsOnAccount(tx, conn.sesAccountId);
    const from = before?.enforcementStatus ?? null;
    if (from !== null && reading.enforcementStatus !== null && from !== reading.enforcementStatus) {
      for (const projectId of projects) {
        await recordProjectEvent(tx, projectId, 'account.enforcement_changed', { project_id: projectId, region: conn.region, from, to: reading.enforcementStatus });
      }
      deps.log.warn({ region: conn.region, from, to: reading.enforcementStatus }, 'SES enforcement status of the account changed');
    }
    if (!reading.sendingEnabled) {
      const paused = await pauseProjects(tx, projects, 'aws_sending_disabled');
      for (const projectId of paused) {
        await recordProjectEvent(tx, projectId, 'project.sending_paused', {
          project_id: projectId, scope: 'account', window: null, kind: null, rate: null, threshold: null, sent: null, events: null, reason: 'aws_sending_disabled',
        });
        deps.log.warn({ projectId, region: conn.region }, 'project paused: SES has disabled sending for its account');
      }
      await stampPause(tx, paused);
    }
  });
}

/** Reads every account due a reading, once per account; one failing is logged and never stops the others. */
export async function checkAccounts(deps: WorkerDeps, opts: { all?: boolean } = {}) {
  const due = new Set((await deps.sql<{ id: string }[]>`
    select id::text from ses_accounts
    where ${opts.all ?? false} or account_checked_at is null or account_checked_at < now() - ${ACCOUNT_READ_EVERY}::interval`).map((r) => r.id));
  for (const conn of await listConnections(deps.sql, deps.config, deps.log)) {
    if (!due.delete(conn.sesAccountId)) continue;
    try {
      await applyAccountReading(deps, conn, await readAccount(deps, conn));
    } catch (err) {
      deps.log.warn({ projectId: conn.projectId, err: (err as Error).name }, 'could not read the SES account');
    }
  }
}

export function reputationCheckTask(deps: WorkerDeps): Task {
  return async () => {
    await checkAccounts(deps);
    await evaluateAll(deps.sql, deps.log);
    await foldCounters(deps.sql);
  };
}
