import type { Sql } from '../platform/db.ts';

/**
 * Sends are spaced 1 / (0.85 × rate) apart, so a send that reaches SES up to about 170 ms later
 * than its slot (a busy event loop, a slow TLS write) still never puts more than the rate into
 * one second. A request that has not left the SES client soon enough after its slot takes
 * another (`sendInTurn`).
 */
const HEADROOM = 0.85;
/** The rate assumed until SES has told us the account's quota: the sandbox's. */
export const UNKNOWN_SEND_RATE = 1;
/** A slot this close is waited for in the task; a later one re-runs the job at its time. */
const MAX_WAIT_MS = 2000;
/** How long a throttle halves the connection's pace. */
const SLOW_FOR = '1 minute';

export type SlotDecision = { waitMs: number } | { retryInMs: number };

/**
 * Takes the connection's next free send slot, shared by every worker through one row: the update
 * is atomic, so two workers never get the same slot, and it needs nothing but PostgreSQL.
 */
export async function reserveSendSlot(sql: Sql, projectId: string): Promise<SlotDecision> {
  const spacing = sql`(1.0 / (${HEADROOM}::float8
    * least(coalesce(max_send_rate, ${UNKNOWN_SEND_RATE}::float8), coalesce(rate_cap, 'infinity'::float8))
    / (case when slowed_until > now() then 2 else 1 end)))`;
  const [slot] = await sql<[{ waitMs: number }?]>`
    update provider_connections
    set next_send_slot = greatest(next_send_slot, now()) + make_interval(secs => ${spacing})
    where project_id = ${projectId} and next_send_slot <= now() + make_interval(secs => ${MAX_WAIT_MS / 1000})
    returning greatest(0, extract(epoch from (next_send_slot - make_interval(secs => ${spacing}) - now())) * 1000)::float8 as wait_ms`;
  if (slot) return { waitMs: slot.waitMs };
  const [busy] = await sql<[{ retryInMs: number }?]>`
    select greatest(0, extract(epoch from (next_send_slot - now())) * 1000)::float8 as retry_in_ms
    from provider_connections where project_id = ${projectId}`;
  return { retryInMs: busy?.retryInMs ?? 0 };
}

/**
 * When the connection's 24-hour quota is spent, how long until the oldest send in the window
 * ages out (at most 10 minutes, so a raised quota is noticed); undefined while there is room.
 */
export async function dailyQuotaWait(sql: Sql, projectId: string): Promise<number | undefined> {
  const [row] = await sql<[{ full: boolean; retryInMs: number }?]>`
    select count(e.id) >= pc.max_24_hour_send as full,
           least(600000, greatest(1000, extract(epoch from (min(e.sent_at) + interval '24 hours' - now())) * 1000))::float8 as retry_in_ms
    from provider_connections pc
    left join emails e on e.project_id = pc.project_id
      and e.sent_at > greatest(now() - interval '24 hours', pc.created_at)
    where pc.project_id = ${projectId} and pc.max_24_hour_send >= 0
    group by pc.max_24_hour_send`;
  return row?.full ? row.retryInMs : undefined;
}

/** SES throttled us: half pace for a minute, and a mark for `ops.providers`. */
export async function slowDown(sql: Sql, projectId: string) {
  await sql`
    with slowed as (
      update provider_connections set slowed_until = now() + ${SLOW_FOR}::interval
      where project_id = ${projectId} returning project_id
    )
    insert into provider_throttles (project_id) select project_id from slowed`;
}
