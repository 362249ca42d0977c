import type { CronItem, Task } from 'graphile-worker';
import { z } from 'zod';
import type { Sql } from '../platform/db.ts';
import type { WorkerDeps } from '../interfaces.ts';

/** Settled statuses need only a daily look; the rest change as soon as DNS propagates. */
const SETTLED = ['success', 'failed'];

/**
 * Which domains are due a check at `now` (the database clock unless given):
 * - never checked: at once;
 * - anything still moving (pending, temporary_failure, not_started in any of the three
 *   statuses): every 10 minutes in the first 72 hours (SES's own verification window), then hourly;
 * - verified or failed: daily.
 * Only projects with an SES connection are considered; the others have nothing to ask.
 */
function dueWhere(sql: Sql, now?: Date) {
  const at = now ? sql`${now.toISOString()}::timestamptz` : sql`now()`;
  return sql`
    d.last_checked_at is null
    or d.last_checked_at <= ${at} - case
      when d.verification_status = any(${SETTLED}::text[])
        and coalesce(d.dkim_status, 'success') = any(${SETTLED}::text[])
        and coalesce(d.mail_from_status, 'success') = any(${SETTLED}::text[]) then interval '1 day'
      when d.created_at > ${at} - interval '72 hours' then interval '10 minutes'
      else interval '1 hour'
    end`;
}

/** Due domain ids, oldest check first (a cross-project scan: the worker serves every project). */
export async function dueDomains(sql: Sql, now?: Date, limit = 500) {
  const rows = await sql<{ id: string; projectId: string }[]>`
    select d.id, d.project_id from domains d
    join provider_connections c on c.project_id = d.project_id
    where ${dueWhere(sql, now)}
    order by d.last_checked_at nulls first, d.id
    limit ${limit}`;
  return rows;
}

/**
 * One `domain__check` job per due domain. The job key `domain_check:<id>` folds a tick's job
 * into one still waiting, so several worker replicas or a slow queue never stack checks up.
 */
export async function enqueueDueChecks(sql: Sql, now?: Date): Promise<number> {
  const due = await dueDomains(sql, now);
  if (due.length === 0) return 0;
  await sql`
    select graphile_worker.add_job('domain__check',
      json_build_object('domain_id', d.id, 'project_id', d.project_id),
      max_attempts => 3, job_key => 'domain_check:' || d.id)
    from unnest(${due.map((d) => d.id)}::text[], ${due.map((d) => d.projectId)}::text[]) as d(id, project_id)`;
  return due.length;
}

/** Cron adds its own `_cron` field; nothing else is expected. */
const RecheckPayload = z.object({ _cron: z.object({ ts: z.string() }).partial().optional() }).loose();

/** `domain__recheck`: the cron tick that fans out the checks. */
export function domainRecheckTask(deps: WorkerDeps): Task {
  return async (payload) => {
    RecheckPayload.parse(payload ?? {});
    const queued = await enqueueDueChecks(deps.sql);
    if (queued) deps.log.info({ queued }, 'domain checks queued');
  };
}

/** Every minute; a missed tick (worker down) is not backfilled, the next one covers it. */
export const DOMAIN_RECHECK_CRON: CronItem = {
  task: 'domain__recheck',
  match: '* * * * *',
  identifier: 'domain__recheck',
  options: { backfillPeriod: 0, maxAttempts: 1, jobKey: 'domain__recheck' },
};
