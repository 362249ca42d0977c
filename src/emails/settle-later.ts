import { setTimeout as sleep } from 'node:timers/promises';
import type { WorkerDeps } from '../interfaces.ts';
import type { EmailEvent } from '../events/record.ts';
import * as q from './queries.ts';
import type { ClaimedEmail } from './queries.ts';

/** How soon a refused settle is tried again, growing to the last and staying there. */
const RETRY_MS = [100, 250, 500, 1000];

type Pending = { email: ClaimedEmail; messageId: string; delivered: boolean; events: EmailEvent[]; done: Promise<void> };

/** Sends the provider accepted whose `sent` the database has not recorded yet, by email id. */
const pending = new Map<string, Pending>();

/**
 * Records `sent` for an email the provider accepted while the database refused the record (it is
 * restarting, failing over, or the connection was cut). The message id is kept here and the
 * record tried again until the database answers; meanwhile the email's lease stays this
 * process's (its heartbeat goes on), so no other attempt sends it again.
 */
export function settleSentWhenBack(deps: WorkerDeps, email: ClaimedEmail, messageId: string, delivered: boolean, events: EmailEvent[]) {
  const { sql, log, leases } = deps;
  leases?.busy.set(email.id, email.projectId);
  const done = (async () => {
    for (let i = 0; ; i++) {
      await sleep(RETRY_MS[Math.min(i, RETRY_MS.length - 1)]!, undefined, { ref: false });
      try {
        const recorded = await q.markSent(sql, email, messageId, delivered, events);
        if (recorded) log.info({ emailId: email.id, providerMessageId: messageId, tries: i + 1 }, 'sent recorded once the database answered');
        // Not recorded: a commit whose answer was lost had recorded it already, or the lease was
        // taken as this process's pool was declared ended.
        else log.warn({ emailId: email.id, providerMessageId: messageId }, 'sent not recorded: the email was no longer held by this attempt');
        return;
      } catch {
        // Still away: keep the message id and try again.
      }
    }
  })().finally(() => {
    pending.delete(email.id);
    leases?.busy.delete(email.id);
  });
  pending.set(email.id, { email, messageId, delivered, events, done });
}

/** Whether an accepted send of this email waits to be recorded. */
export function settlePending(emailId: string): boolean {
  return pending.has(emailId);
}

/** How many accepted sends wait to be recorded. */
export function pendingSettleCount(): number {
  return pending.size;
}

/**
 * For an orderly stop: waits for the pending records (bounded by the caller's shutdown budget).
 * Those still unrecorded are logged with their message ids, for an operator to reconcile.
 */
export async function flushPendingSettles(deps: Pick<WorkerDeps, 'log'>, timeoutMs: number) {
  if (pending.size === 0) return;
  const all = Promise.all([...pending.values()].map((p) => p.done));
  await Promise.race([all, sleep(timeoutMs, undefined, { ref: false })]);
  for (const p of pending.values()) {
    deps.log.error({ emailId: p.email.id, projectId: p.email.projectId, providerMessageId: p.messageId },
      'stopping with an accepted send not recorded as sent; it may be sent again');
  }
}
