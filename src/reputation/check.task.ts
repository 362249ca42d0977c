import type { CronItem, Task } from 'graphile-worker';
import { z } from 'zod';
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
  // One sweep at a time: a tick while one runs waits behind it (its queue), and ticks waiting
  // meanwhile are one job (its key), never a pile of sweeps over the same projects.
  options: { backfillPeriod: 0, queueName: 'reputation__check', jobKey: 'reputation__check' },
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

/** The accounts due a reading (or every one), by id. */
async function dueAccounts(deps: WorkerDeps, all: boolean): Promise<string[]> {
  const rows = await deps.sql<{ id: string }[]>`
    select id::text from ses_accounts
    where ${all} or account_checked_at is null or account_checked_at < now() - ${ACCOUNT_READ_EVERY}::interval
    order by id`;
  return rows.map((r) => r.id);
}

/** Reads one account through one of its connections and stores what SES said; false when it has none. */
export async function checkAccount(deps: WorkerDeps, accountId: string): Promise<boolean> {
  const conn = (await listConnections(deps.sql, deps.config, deps.log)).find((c) => c.sesAccountId === accountId);
  if (!conn) return false;
  try {
    await applyAccountReading(deps, conn, await readAccount(deps, conn));
  } catch (err) {
    deps.log.warn({ projectId: conn.projectId, err: (err as Error).name }, 'could not read the SES account');
  }
  return true;
}

/** Reads every account due a reading, once per account, one after another (the CLI and tests). */
export async function checkAccounts(deps: WorkerDeps, opts: { all?: boolean } = {}) {
  for (const id of await dueAccounts(deps, opts.all ?? false)) await checkAccount(deps, id);
}

/**
 * A `reputation__read_account` job per account due a reading, keyed by the account: each reads
 * its own account (GetAccount has up to 10 s), side by side, so one slow account never delays
 * another's reading past 5 minutes, and an account never has two readings waiting.
 */
export async function enqueueAccountReadings(deps: WorkerDeps): Promise<number> {
  const due = await dueAccounts(deps, false);
  if (due.length === 0) return 0;
  await deps.sql`
    select graphile_worker.add_jobs(array(
      select row('reputation__read_account', json_build_object('ses_account_id', id), null, now(), 1,
                 'reputation__read_account:' || id, null, null)::graphile_worker.job_spec
      from unnest(${due}::text[]) as a(id) order by id))`;
  return due.length;
}

const ReadAccountPayload = z.object({ ses_account_id: z.string().regex(/^\d+$/) });

/** `reputation__read_account`: one account's GetAccount reading (safe to run twice: it stores the latest). */
export function accountReadTask(deps: WorkerDeps): Task {
  return async (payload) => {
    const { ses_account_id: accountId } = ReadAccountPayload.parse(payload);
    await checkAccount(deps, accountId);
  };
}

export function reputationCheckTask(deps: WorkerDeps): Task {
  return async () => {
    await enqueueAccountReadings(deps);
    await evaluateAll(deps.sql, deps.log);
    await foldCounters(deps.sql);
  };
}
