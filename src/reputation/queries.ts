import { sendPriorityOfRow } from '../emails/queries.ts';
import type { Sql, TxSql } from '../platform/db.ts';
import { recordAudit } from '../audit/record.ts';

export type Scope = 'project' | 'account';
export type WindowName = '1h' | 'representative';
export type Kind = 'bounce' | 'complaint';

/** One window of one scope, as mailroom_reputation() reads it from the hourly counters. */
export type ReputationWindow = { scope: Scope; window: WindowName; sent: number; bounced: number; complained: number; since: Date };

export type Thresholds = { bounceWarn: number; bouncePause: number; complaintWarn: number; complaintPause: number };

export const DEFAULT_THRESHOLDS: Thresholds = { bounceWarn: 0.02, bouncePause: 0.04, complaintWarn: 0.0005, complaintPause: 0.0008 };

/** SES reviews an account at these rates (and pauses it at twice as much): no pause may sit above them. */
export const SES_REVIEW = { bounce: 0.05, complaint: 0.001 } as const;
export const SES_PAUSE = { bounce: 0.1, complaint: 0.005 } as const;

/** A window acts only from this many sent recipients and events of the kind (§19.2). */
export const ACTS_FROM: Record<WindowName, { sent: number; events: number }> = {
  '1h': { sent: 200, events: 5 },
  representative: { sent: 1000, events: 10 },
};

export type ReputationState = Thresholds & {
  pausedAt: Date | null;
  pauseReason: string | null;
  warnedAt: Date | null;
  countingSince: Date | null;
  /** The project's SES account and what GetAccount last said of it; null for a sink project. */
  accountId: string | null;
  region: string | null;
  enforcementStatus: string | null;
  sendingEnabled: boolean | null;
  accountCheckedAt: Date | null;
};

/** The one read of a project's windows (mailroom_reputation), shared with /metrics and ops.reputation. */
export async function readWindows(sql: Sql | TxSql, projectId: string): Promise<ReputationWindow[]> {
  const rows = await sql<{ scope: Scope; window: WindowName; sent: string; bounced: string; complained: string; since: Date }[]>`
    select scope, "window", sent, bounced, complained, since from mailroom_reputation(${projectId})`;
  return rows.map((r) => ({ scope: r.scope, window: r.window, sent: Number(r.sent), bounced: Number(r.bounced), complained: Number(r.complained), since: r.since }));
}

export async function readState(sql: Sql | TxSql, projectId: string): Promise<ReputationState> {
  const [row] = await sql<[ReputationState?]>`
    select coalesce(r.bounce_warn, ${DEFAULT_THRESHOLDS.bounceWarn}) as bounce_warn,
      coalesce(r.bounce_pause, ${DEFAULT_THRESHOLDS.bouncePause}) as bounce_pause,
      coalesce(r.complaint_warn, ${DEFAULT_THRESHOLDS.complaintWarn}) as complaint_warn,
      coalesce(r.complaint_pause, ${DEFAULT_THRESHOLDS.complaintPause}) as complaint_pause,
      r.paused_at, r.pause_reason, r.warned_at, r.counting_since,
      a.id::text as account_id, a.region, a.enforcement_status, a.sending_enabled, a.account_checked_at
    from (select ${projectId}::text as project_id) p
    left join project_reputation r on r.project_id = p.project_id
    left join provider_connections pc on pc.project_id = p.project_id
    left join ses_accounts a on a.id = pc.ses_account_id`;
  return row!;
}

/** Stores the thresholds (already checked by the caller against SES's levels). */
export async function storeThresholds(sql: Sql | TxSql, projectId: string, t: Thresholds) {
  await sql`
    insert into project_reputation (project_id, bounce_warn, bounce_pause, complaint_warn, complaint_pause)
    values (${projectId}, ${t.bounceWarn}, ${t.bouncePause}, ${t.complaintWarn}, ${t.complaintPause})
    on conflict (project_id) do update set bounce_warn = excluded.bounce_warn, bounce_pause = excluded.bounce_pause,
      complaint_warn = excluded.complaint_warn, complaint_pause = excluded.complaint_pause, updated_at = now()`;
}

/**
 * Pauses the projects not paused yet, in id order (so two pauses never lock in opposite orders);
 * answers those it paused. paused_at is the moment of the pause, just before its commit, not the
 * transaction's start: sends that left between the two left before the pause.
 */
export async function pauseProjects(tx: TxSql, projectIds: string[], reason: string): Promise<string[]> {
  const ids = [...new Set(projectIds)].sort();
  if (ids.length === 0) return [];
  const rows = await tx<{ projectId: string }[]>`
    insert into project_reputation as r (project_id, paused_at, pause_reason)
    select id, clock_timestamp(), ${reason} from unnest(${ids}::text[]) as ids(id) order by id
    on conflict (project_id) do update set paused_at = excluded.paused_at, pause_reason = excluded.pause_reason, updated_at = now()
      where r.paused_at is null
    returning project_id`;
  // The worker pauses (its actor is the system's); the entry commits with the pause.
  for (const { projectId } of rows) {
    await recordAudit(tx, { action: 'reputation.paused', projectId, target: { type: 'reputation', id: projectId }, changes: { paused: true, reason } });
  }
  return rows.map((r) => r.projectId);
}

/**
 * The pause's moment, stamped by the transaction's last statement: what the caller records with
 * the pause (its webhook event, the audit entry) comes before it, so paused_at is as close to the
 * commit, when claims start to see the pause, as the database can tell.
 */
export async function stampPause(tx: TxSql, projectIds: string[]) {
  if (projectIds.length === 0) return;
  await tx`
    with stamped as (
      update project_reputation set paused_at = clock_timestamp() where project_id = any(${projectIds}::text[]) and paused_at is not null
      returning project_id)
    select pg_notify(${PAUSED_CHANNEL}, project_id) from stamped`;
}

/** Each pause is announced here as it commits (a notification is delivered at the commit), with the project id. */
export const PAUSED_CHANNEL = 'mailroom_reputation_paused';

/** Marks the project warned (true if it was not already) or clears the mark. */
export async function markWarned(tx: TxSql, projectId: string, warned: boolean): Promise<boolean> {
  const rows = warned
    ? await tx`
      insert into project_reputation as r (project_id, warned_at) values (${projectId}, now())
      on conflict (project_id) do update set warned_at = now(), updated_at = now() where r.warned_at is null
      returning 1`
    : await tx`update project_reputation set warned_at = null, updated_at = now() where project_id = ${projectId} and warned_at is not null returning 1`;
  return rows.length > 0;
}

/**
 * Resumes a paused project: its windows start afresh now (the counters of this hour so far, the
 * account's included, become the baseline), and its held emails (queued, or scheduled and due)
 * get their jobs again, all due now, in id order so they leave in the order they were accepted.
 * Answers how many emails were released, or undefined when the project was not paused.
 */
export async function resumeProject(tx: TxSql, projectId: string): Promise<number | undefined> {
  const [row] = await tx<[{ resumed: boolean }?]>`
    with hour_counts as (
      select jsonb_build_object(
        'project', (select jsonb_build_object(
            'sent', coalesce(sum(n) filter (where metric = 'sent'), 0),
            'bounced', coalesce(sum(n) filter (where metric = 'bounced'), 0),
            'complained', coalesce(sum(n) filter (where metric = 'complained'), 0))
          from reputation_counts where project_id = ${projectId} and hour = date_trunc('hour', now())),
        -- Summed as mailroom_reputation() sums the account for this project: the other projects'
        -- late bounces and complaints count, its own do not.
        'account', (select jsonb_build_object(
            'sent', coalesce(sum(n) filter (where metric = 'sent'), 0),
            'bounced', coalesce(sum(n) filter (where metric = 'bounced' or (metric = 'bounced_late' and project_id <> ${projectId})), 0),
            'complained', coalesce(sum(n) filter (where metric = 'complained' or (metric = 'complained_late' and project_id <> ${projectId})), 0))
          from reputation_counts where account_id = (select ses_account_id from provider_connections where project_id = ${projectId})
            and hour = date_trunc('hour', now()))) as baseline
    )
    update project_reputation r set paused_at = null, pause_reason = null, warned_at = null,
      counting_since = now(), baseline = (select baseline from hour_counts), updated_at = now()
    where r.project_id = ${projectId} and r.paused_at is not null
    returning true as resumed`;
  if (!row) return undefined;
  // The counters' rows of this hour are locked by the baseline's read only as a snapshot: an event
  // recorded meanwhile by another transaction counts after the resume, which is where it belongs.
  const released = await tx`
    with held as (
      update emails set status = 'queued', updated_at = now()
      where project_id = ${projectId}
        and (status = 'queued' or (status = 'scheduled' and scheduled_at <= now()))
      returning id, project_id, broadcast_id
    )
    -- graphile-worker takes jobs by priority, then run_at (ties in no set order): one microsecond apart, in
    -- id order, the held mail is taken in the order it was accepted.
    select count(*) from graphile_worker.add_jobs(array(
      select row('email__send', json_build_object('email_id', id, 'project_id', project_id), null,
                 now() + (row_number() over (order by id)) * interval '1 microsecond', 25, id,
                 ${sendPriorityOfRow(tx)}, null)::graphile_worker.job_spec
      from held order by id))`;
  return released.count > 0 ? Number((released[0] as { count: string }).count) : 0;
}

/** Whether the project is paused now: the claim refuses its emails while it is. */
export async function isPaused(sql: Sql | TxSql, projectId: string): Promise<boolean> {
  const [row] = await sql`select 1 from project_reputation where project_id = ${projectId} and paused_at is not null`;
  return row !== undefined;
}

/** The projects on an SES account, for the account scope. */
export async function projectsOnAccount(sql: Sql | TxSql, accountId: string): Promise<string[]> {
  const rows = await sql<{ projectId: string }[]>`
    select project_id from provider_connections where ses_account_id = ${accountId} order by project_id`;
  return rows.map((r) => r.projectId);
}

/**
 * Folds each past hour's per-connection rows into one (shard 0), so a reading adds up one row per
 * hour and metric, and drops hours older than any window reads (31 days). An hour is folded once
 * it is five minutes over, when no transaction that started in it is still adding to it.
 */
export async function foldCounters(sql: Sql) {
  await sql`
    with gone as (
      delete from reputation_counts
      where (shard <> 0 and hour < date_trunc('hour', now() - interval '5 minutes')) or hour < now() - interval '31 days'
      returning project_id, account_id, hour, metric, n)
    insert into reputation_counts as c (project_id, account_id, hour, metric, shard, n)
    select project_id, account_id, hour, metric, 0, sum(n) from gone
    where hour >= now() - interval '31 days'
    group by 1, 2, 3, 4
    order by 1, 2, 3, 4
    on conflict (project_id, account_id, hour, metric, shard) do update set n = c.n + excluded.n`;
}
