import type { CronItem, Task } from 'graphile-worker';
import type { WorkerDeps } from '../interfaces.ts';
import type { Sql } from '../platform/db.ts';
import type { Logger } from '../platform/log.ts';
import { sendPriorityOfRow } from './queries.ts';

/**
 * Every ten minutes: an unsent email whose `email__send` job is gone gets one again. Every path
 * that leaves an email unsent adds its job in the same statement or transaction, so this finds
 * only what a fault left behind (a job runner's completion that deleted a job its task had keyed
 * again, say); without it such an email would wait for good.
 */
export const ORPHAN_SWEEP_CRON: CronItem = {
  task: 'email__requeue_orphans',
  match: '*/10 * * * *',
  identifier: 'email__requeue_orphans',
  options: { backfillPeriod: 0, maxAttempts: 1 },
};

/** Untouched for this long before an email without a job counts as left behind, so no transition in progress is taken for one. */
const SETTLE_FOR = '10 minutes';
/** At most this many each run; a larger fault is taken over the next runs. */
const BATCH = 1000;

export function orphanSweepTask(deps: WorkerDeps): Task {
  return async () => {
    await requeueOrphans(deps.sql, deps.log);
  };
}

/**
 * Adds the job of each email left `scheduled`, `queued` or `sending` with none, untouched for
 * SETTLE_FOR: due at its schedule, else now, at its own priority. Not mail a paused project holds
 * (§19.4: queued with no job until the resume), and not a `sending` email whose lease still
 * runs. The claim decides the rest as for any job. Answers how many got a job.
 */
export async function requeueOrphans(sql: Sql, log: Logger): Promise<number> {
  const rows = await sql<{ id: string; projectId: string; status: string }[]>`
    with orphans as (
      select e.id, e.project_id, e.status, e.scheduled_at, e.broadcast_id from emails e
      where e.status in ('scheduled', 'queued', 'sending') and e.updated_at < now() - ${SETTLE_FOR}::interval
        and (e.status <> 'sending' or coalesce(e.lease_expires_at < now(), true))
        and (e.status = 'sending' or not exists (
          select 1 from project_reputation r where r.project_id = e.project_id and r.paused_at is not null))
        and not exists (select 1 from graphile_worker._private_jobs j where j.key = e.id)
      -- No order: the unsent rows are read through their own small partial index (emails_unsent_idx).
      limit ${BATCH}
    ), added as (
      select count(*) from graphile_worker.add_jobs(array(
        select row('email__send', json_build_object('email_id', o.id, 'project_id', o.project_id), null,
                   greatest(o.scheduled_at, now()), 25, o.id, ${sendPriorityOfRow(sql)}, null)::graphile_worker.job_spec
        from orphans o)))
    select o.id, o.project_id, o.status from orphans o cross join added`;
  if (rows.length) {
    log.warn({ emails: rows.length, sample: rows.slice(0, 5).map((r) => ({ id: r.id, projectId: r.projectId, status: r.status })) },
      'unsent emails without a send job were given one again');
  }
  return rows.length;
}
