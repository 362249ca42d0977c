import type { Sql } from '../platform/db.ts';

/**
 * What SES counts, and so what Mailroom accounts for, in one place: recipients per second and per
 * 24 hours, per AWS account and region (`ses_accounts`, shared by every project connected with
 * that access key id). The send task asks here and never counts for itself.
 *
 * Slots are spaced 1 / (0.85 × rate) apart per recipient, and no window of 1 / 0.85 s holds more
 * recipients than the rate, so a send that reaches SES up to about 170 ms after its slot (a busy
 * event loop, a slow TLS write) still never puts more than the rate into one second. A request
 * that has not left the SES client soon enough after its slot takes another (`sendInTurn`).
 */
const HEADROOM = 0.85;
/** The rate assumed until SES has told us the account's quota: the sandbox's. */
export const UNKNOWN_SEND_RATE = 1;
/** A slot this close is waited for in the task; a later one re-runs the job at its time. */
const MAX_WAIT_MS = 2000;
/** How long a throttle halves the account's pace. */
const SLOW_FOR = '1 minute';

/** A slot taken (`waitMs` until it), or none: the pace is ahead (`retryInMs`) or the day is spent (`quotaWaitMs`). */
export type SlotDecision =
  | { waitMs: number; slot: TakenSlot }
  | { retryInMs: number }
  | { quotaWaitMs: number };

/** A slot as taken, so it can be given back when nothing was sent in it. */
export type TakenSlot = { accountId: string; at: Date; recipients: number; takenAt: number };

/**
 * Takes the account's next free slots for an email of `recipients` recipients (SES counts each),
 * and counts them against the day. One call, under the account row's lock: two workers never get
 * the same slot, and the daily check reads at most 25 hourly counters whatever the volume.
 */
export async function reserveSendSlot(sql: Sql, projectId: string, recipients = 1): Promise<SlotDecision> {
  // A slot counts as taken when it was asked for: one decided just before a throttle was recorded
  // but answered after this process heard of it is still one spaced for the old pace.
  const asked = performance.now();
  const [row] = await sql<[{ accountId: string; slotAt: Date | null; waitMs: number | null; retryInMs: number | null; quotaWaitMs: number | null }?]>`
    select account_id::text, slot_at, wait_ms, retry_in_ms, quota_wait_ms
    from mailroom_take_send_slots(${projectId}, ${Math.max(1, recipients)}::int, ${HEADROOM}::float8, ${MAX_WAIT_MS}::float8, ${UNKNOWN_SEND_RATE}::float8)`;
  if (!row) return { retryInMs: 0 };
  if (row.quotaWaitMs !== null) return { quotaWaitMs: row.quotaWaitMs };
  if (row.retryInMs !== null) return { retryInMs: row.retryInMs };
  return { waitMs: row.waitMs ?? 0, slot: { accountId: row.accountId, at: row.slotAt!, recipients: Math.max(1, recipients), takenAt: asked } };
}

/**
 * A slot nothing was sent in (the request missed it, or SES throttled it): its recipients no
 * longer count against the day. The pace keeps it; a missed slot is simply not used.
 */
export async function giveBackSlot(sql: Sql, slot: TakenSlot) {
  await sql`
    update ses_account_usage set recipients = greatest(0, recipients - ${slot.recipients})
    where account_id = ${slot.accountId} and hour = date_trunc('hour', ${slot.at}::timestamptz)`;
}

/** When each account was last throttled, as this process learnt it (`performance.now()`). */
const throttledAt = new Map<string, number>();

/** Where a throttle is announced to every worker process, with the account id. */
const THROTTLE_CHANNEL = 'mailroom_ses_throttled';

/**
 * Hears of the throttles other worker processes meet (§16.2). The slots a process was given
 * before one are spaced for a rate SES no longer allows: `throttledSince` makes their sends give
 * them back, and the new slots wait for the quota's re-read (mailroom_take_send_slots).
 */
export function followThrottles(sql: Sql) {
  return sql.listen(THROTTLE_CHANNEL, (accountId) => { throttledAt.set(accountId, performance.now()); });
}

/**
 * Whether the account was throttled after the slot was taken, in this process or in another that
 * announced it: the slot was spaced for a rate SES no longer allows, so the send takes a new one
 * rather than be throttled too.
 */
export function throttledSince(slot: TakenSlot): boolean {
  return (throttledAt.get(slot.accountId) ?? -Infinity) > slot.takenAt;
}

/**
 * SES throttled a send: half pace for a minute for every project on the account, the slot's
 * recipients given back, and a mark for `ops.providers`. No process takes a slot on the account
 * again until the caller has read its quota again (`throttled_at`), and every process drops the
 * slots it was given before now (THROTTLE_CHANNEL).
 */
export async function slowDown(sql: Sql, projectId: string, slot?: TakenSlot) {
  if (slot) throttledAt.set(slot.accountId, performance.now());
  const [row] = await sql<[{ accountId: string }?]>`
    with slowed as (
      update ses_accounts set slowed_until = now() + ${SLOW_FOR}::interval, throttled_at = now(),
        -- Slots already handed out were spaced for the old pace; the next one starts afresh.
        next_send_slot = greatest(next_send_slot, now())
      where id = (select ses_account_id from provider_connections where project_id = ${projectId})
      returning id
    ), marked as (
      insert into provider_throttles (project_id) select ${projectId} from slowed
    )
    -- Every worker process hears of it at this commit, and drops the slots it holds.
    select s.id::text as account_id from slowed s cross join lateral (select pg_notify(${THROTTLE_CHANNEL}, s.id::text)) announced`;
  if (row) throttledAt.set(row.accountId, performance.now());
  if (slot) await giveBackSlot(sql, slot);
}
