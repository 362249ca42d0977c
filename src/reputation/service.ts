import { beginRetryingDeadlocks, type Sql } from '../platform/db.ts';
import type { Logger } from '../platform/log.ts';
import { recordProjectEvent } from '../events/record.ts';
import { recordAudit } from '../audit/record.ts';
import { crossing, rateOf } from './evaluate.ts';
import { readState, readWindows, resumeProject, SES_REVIEW, storeThresholds, type ReputationState, type ReputationWindow, type Thresholds } from './queries.ts';

/** `GET /v1/reputation`'s body (§19.6), also what the dashboard, the CLI and /metrics show. */
export type ReputationView = {
  state: 'ok' | 'warning' | 'paused';
  paused_at: string | null;
  reason: string | null;
  thresholds: { bounce_rate: { warn: number; pause: number }; complaint_rate: { warn: number; pause: number } };
  windows: {
    scope: 'project' | 'account'; window: '1h' | 'representative'; sent: number; bounced: number; complained: number;
    bounce_rate: number; complaint_rate: number; since: string;
  }[];
  aws: { enforcement_status: string | null; sending_enabled: boolean | null; checked_at: string | null } | null;
};

export function toView(state: ReputationState, windows: ReputationWindow[]): ReputationView {
  const warning = crossing(windows, state, 'warn') !== undefined;
  return {
    state: state.pausedAt ? 'paused' : warning ? 'warning' : 'ok',
    paused_at: state.pausedAt?.toISOString() ?? null,
    reason: state.pauseReason,
    thresholds: {
      bounce_rate: { warn: state.bounceWarn, pause: state.bouncePause },
      complaint_rate: { warn: state.complaintWarn, pause: state.complaintPause },
    },
    windows: windows.map((w) => ({
      scope: w.scope, window: w.window, sent: w.sent, bounced: w.bounced, complained: w.complained,
      bounce_rate: rateOf(w, 'bounce'), complaint_rate: rateOf(w, 'complaint'), since: w.since.toISOString(),
    })),
    // No reading yet (or a sink project): null, never an object of nulls (§22.9).
    aws: state.accountId === null || state.accountCheckedAt === null ? null : {
      enforcement_status: state.enforcementStatus,
      sending_enabled: state.sendingEnabled,
      checked_at: state.accountCheckedAt?.toISOString() ?? null,
    },
  };
}

export async function getReputation(sql: Sql, projectId: string): Promise<ReputationView> {
  const [state, windows] = await Promise.all([readState(sql, projectId), readWindows(sql, projectId)]);
  return toView(state, windows);
}

export type ThresholdsPatch = {
  bounce_rate?: { warn?: number; pause?: number };
  complaint_rate?: { warn?: number; pause?: number };
};

/** A rule the thresholds break, with where (`['body', 'bounce_rate', 'pause']`), or undefined. */
export type ThresholdProblem = { loc: string[]; msg: string };

/** The thresholds after the patch, or what is wrong with them (§19.3). */
export function applyThresholds(current: Thresholds, patch: ThresholdsPatch): Thresholds | ThresholdProblem {
  const next: Thresholds = {
    bounceWarn: patch.bounce_rate?.warn ?? current.bounceWarn,
    bouncePause: patch.bounce_rate?.pause ?? current.bouncePause,
    complaintWarn: patch.complaint_rate?.warn ?? current.complaintWarn,
    complaintPause: patch.complaint_rate?.pause ?? current.complaintPause,
  };
  const checks: [string, 'warn' | 'pause', number][] = [
    ['bounce_rate', 'warn', next.bounceWarn], ['bounce_rate', 'pause', next.bouncePause],
    ['complaint_rate', 'warn', next.complaintWarn], ['complaint_rate', 'pause', next.complaintPause],
  ];
  for (const [kind, level, value] of checks) {
    if (!(value >= 0)) return { loc: ['body', kind, level], msg: 'A rate is a fraction of at least 0' };
  }
  if (next.bouncePause > SES_REVIEW.bounce) return { loc: ['body', 'bounce_rate', 'pause'], msg: `The pause may not be above SES's review level of ${SES_REVIEW.bounce} hard bounces` };
  if (next.complaintPause > SES_REVIEW.complaint) return { loc: ['body', 'complaint_rate', 'pause'], msg: `The pause may not be above SES's review level of ${SES_REVIEW.complaint} complaints` };
  if (next.bounceWarn > next.bouncePause) return { loc: ['body', 'bounce_rate', 'warn'], msg: 'The warning may not be above the pause' };
  if (next.complaintWarn > next.complaintPause) return { loc: ['body', 'complaint_rate', 'warn'], msg: 'The warning may not be above the pause' };
  return next;
}

/** Applies the patch and answers the new view, or the problem (nothing stored then). */
export async function changeThresholds(sql: Sql, projectId: string, patch: ThresholdsPatch): Promise<ReputationView | ThresholdProblem> {
  return sql.begin(async (tx) => {
    // The row is locked by the upsert only; two patches at once each apply to what they read, last wins.
    const next = applyThresholds(await readState(tx, projectId), patch);
    if ('loc' in next) return next;
    await storeThresholds(tx, projectId, next);
    await recordAudit(tx, {
      action: 'reputation.settings_changed', projectId, target: { type: 'reputation', id: projectId },
      changes: { bounce_threshold: [next.bounceWarn, next.bouncePause], complaint_threshold: [next.complaintWarn, next.complaintPause] },
    });
    return toView(await readState(tx, projectId), await readWindows(tx, projectId));
  });
}

/**
 * Resumes a paused project (the API, the dashboard and the CLI all come here): its held mail gets
 * its jobs back, its windows start afresh, and its endpoints hear `project.sending_resumed`, in
 * one transaction. `released` is undefined when the project was not paused (nothing changes).
 */
export async function resumeSending(sql: Sql, log: Logger, projectId: string): Promise<{ resumed: boolean; released: number }> {
  // Its held mail is re-queued in one statement, which a worker's shared commit may meet in another order.
  const released = await beginRetryingDeadlocks(sql, async (tx) => {
    const n = await resumeProject(tx, projectId);
    if (n !== undefined) {
      await recordAudit(tx, { action: 'reputation.resumed', projectId, target: { type: 'reputation', id: projectId }, changes: { paused: false } });
      await recordProjectEvent(tx, projectId, 'project.sending_resumed', {
        project_id: projectId, scope: null, window: null, kind: null, rate: null, threshold: null, sent: null, events: null, released: n,
      });
    }
    return n;
  });
  if (released !== undefined) log.info({ projectId, released }, 'project resumed: held mail released');
  return { resumed: released !== undefined, released: released ?? 0 };
}
