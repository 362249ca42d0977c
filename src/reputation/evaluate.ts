import type { Sql, TxSql } from '../platform/db.ts';
import type { Logger } from '../platform/log.ts';
import { recordProjectEvent } from '../events/record.ts';
import { ACTS_FROM, markWarned, pauseProjects, projectsOnAccount, stampPause, readState, readWindows, type Kind, type ReputationState, type ReputationWindow, type Scope, type WindowName } from './queries.ts';

/** A window over a threshold, as the webhooks' `data` tells it. */
export type Crossing = { scope: Scope; window: WindowName; kind: Kind; rate: number; threshold: number; sent: number; events: number };

export function rateOf(w: ReputationWindow, kind: Kind): number {
  return w.sent > 0 ? (kind === 'bounce' ? w.bounced : w.complained) / w.sent : 0;
}

/** The first window of `windows` that acts (§19.2) and is at or over the level, or undefined. */
export function crossing(windows: ReputationWindow[], state: ReputationState, level: 'warn' | 'pause', scopes: Scope[] = ['project', 'account']): Crossing | undefined {
  for (const w of windows) {
    if (!scopes.includes(w.scope)) continue;
    for (const kind of ['bounce', 'complaint'] as const) {
      const events = kind === 'bounce' ? w.bounced : w.complained;
      const threshold = kind === 'bounce'
        ? (level === 'pause' ? state.bouncePause : state.bounceWarn)
        : (level === 'pause' ? state.complaintPause : state.complaintWarn);
      if (w.sent < ACTS_FROM[w.window].sent || events < ACTS_FROM[w.window].events) continue;
      const rate = rateOf(w, kind);
      if (rate >= threshold) return { scope: w.scope, window: w.window, kind, rate, threshold, sent: w.sent, events };
    }
  }
  return undefined;
}

const eventData = (projectId: string, c: Crossing, reason?: string) =>
  ({ project_id: projectId, scope: c.scope, window: c.window, kind: c.kind, rate: c.rate, threshold: c.threshold, sent: c.sent, events: c.events, ...(reason ? { reason } : {}) });

/**
 * Reads the project's windows after a hard bounce or complaint and acts on them, inside the
 * caller's transaction: a pause (of the project, or for the account scope of every project on
 * the account whose own account window crosses too) commits with the event that caused it, and
 * so does its webhook. A warning only marks the project and tells its endpoints once.
 */
export async function evaluateReputation(tx: TxSql, log: Logger, projectId: string): Promise<void> {
  const state = await readState(tx, projectId);
  if (state.accountId === null) return;
  const windows = await readWindows(tx, projectId);
  // The account's windows cross for its other projects too, even while this one is paused.
  const overAccount = crossing(windows, state, 'pause', ['account']);
  const due = new Map<string, { over: Crossing; why: string }>();
  const over = state.pausedAt ? undefined : crossing(windows, state, 'pause', ['project']) ?? overAccount;
  if (over) due.set(projectId, { over, why: 'project paused: reputation over its pause threshold' });
  if (overAccount) {
    for (const [peer, peerOver] of await accountPeersOver(tx, projectId, state.accountId)) {
      due.set(peer, { over: peerOver, why: 'project paused: its SES account is over the pause threshold' });
    }
  }
  // Every pause of this transaction in one id order: two projects of an account crossing at the
  // same moment lock each other's rows in the same order, never in opposite ones (§22.9).
  const paused: string[] = [];
  for (const id of [...due.keys()].sort()) {
    const { over: o, why } = due.get(id)!;
    const reason = `${o.kind}_rate`;
    for (const p of await pauseProjects(tx, [id], reason)) {
      await recordProjectEvent(tx, p, 'project.sending_paused', eventData(p, o, reason));
      log.warn({ projectId: p, ...o }, why);
      paused.push(p);
    }
  }
  await stampPause(tx, paused);
  if (state.pausedAt || over) return;
  const warn = crossing(windows, state, 'warn');
  if (await markWarned(tx, projectId, warn !== undefined) && warn) {
    await recordProjectEvent(tx, projectId, 'project.reputation_warning', eventData(projectId, warn));
    log.info({ projectId, ...warn }, 'project reputation over its warning threshold');
  }
}

/**
 * The account's rates crossed: the account's other projects, not paused, whose account windows
 * (counted from their own last resume) cross their own pause threshold, with that crossing.
 */
async function accountPeersOver(tx: TxSql, projectId: string, accountId: string): Promise<Map<string, Crossing>> {
  const over = new Map<string, Crossing>();
  for (const peer of await projectsOnAccount(tx, accountId)) {
    if (peer === projectId) continue;
    const state = await readState(tx, peer);
    if (state.pausedAt) continue;
    const c = crossing(await readWindows(tx, peer), state, 'pause', ['account']);
    if (c) over.set(peer, c);
  }
  return over;
}

/** Evaluates every connected project that is not paused, each in its own transaction (the periodic sweep). */
export async function evaluateAll(sql: Sql, log: Logger): Promise<void> {
  const rows = await sql<{ projectId: string }[]>`
    select pc.project_id from provider_connections pc
    where not exists (select 1 from project_reputation r where r.project_id = pc.project_id and r.paused_at is not null)
    order by pc.project_id`;
  for (const { projectId } of rows) {
    await sql.begin((tx) => evaluateReputation(tx, log, projectId));
  }
}
