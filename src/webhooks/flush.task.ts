import type { Task } from 'graphile-worker';
import { z } from 'zod';
import type { Sql } from '../platform/db.ts';
import { createAttempter, type Attempt, type AttemptDeps, type Attempter } from './attempt.ts';
import { flushJob, flushLock } from './queries.ts';

const Payload = z.object({ endpoint_id: z.string().min(1), project_id: z.string().min(1) });

/** Requests a flush keeps in flight to its endpoint at once. */
export const FLUSH_IN_FLIGHT = 8;
/** Deliveries one claim takes: two rounds of requests, so the next claim overlaps the last round. */
const CLAIM_BATCH = FLUSH_IN_FLIGHT * 2;
/**
 * How long a claim keeps other flushes off its deliveries. A claimed delivery waits at most two
 * rounds of requests before its own starts; one that somehow waited longer is left to the next
 * flush rather than posted under a lease about to run out.
 */
const LEASE_MS = 60_000;
/** Outcomes waiting to commit at most, before the requests wait for them. */
const MAX_SETTLING = CLAIM_BATCH * 2;
/** A flush stops claiming after this long and hands what is left to a fresh job, so a busy endpoint neither holds a worker slot for good nor delays a shutdown. */
const FLUSH_BUDGET_MS = 30_000;

/**
 * Leases the endpoint's oldest deliveries not yet attempted and not held by another flush, and
 * reads them with the endpoint and the events: one call of `webhook_flush_claim`, which plans its
 * statement for each call's values. The endpoint is read here, so a URL edit or a switch-off
 * reaches every delivery claimed after it.
 */
async function claim(sql: Sql, projectId: string, endpointId: string, limit: number) {
  const rows = await sql<ClaimedRow[]>`select * from webhook_flush_claim(${endpointId}, ${projectId}, ${LEASE_MS / 1000}, ${limit})`;
  // A delivery added by an event recorded while its endpoint was being deleted outlived the
  // delete's trigger; it goes now, else every lease's end would bring a flush back for it.
  const orphans = rows.filter((r) => r.url === null).map((r) => r.id);
  if (orphans.length) {
    await sql`
      delete from webhook_deliveries where id = any(${orphans}) and project_id = ${projectId} and endpoint_id = ${endpointId}
        and not exists (select 1 from webhook_endpoints w where w.id = ${endpointId} and w.project_id = ${projectId})`;
  }
  // A delivery whose endpoint or event went meanwhile has nothing to attempt.
  const attempts = rows.filter((r): r is Attempt => r.url !== null && r.eventId !== null);
  return { attempts, full: rows.length === limit };
}

type ClaimedRow = { [K in keyof Attempt]: K extends 'url' | 'eventId' ? string | null : Attempt[K] };

/**
 * Lets go of claimed deliveries that were not attempted, then makes sure a flush will come for
 * whatever of the endpoint's is still unattempted: now if any is free, else when the first lease
 * runs out (one held by a flush that died is picked up then). A flush already waiting keeps its
 * earlier time.
 */
async function handOver(sql: Sql, projectId: string, endpointId: string, unattempted: string[]) {
  await sql.begin(async (tx) => {
    // Deliveries being added now commit first, so the look below cannot miss one whose flush job
    // this run's own lock on the job swallowed.
    await tx`select ${flushLock(tx, tx`${endpointId}::text`, 'exclusive')}`;
    if (unattempted.length) {
      await tx`
        update webhook_deliveries set leased_until = null
        where id = any(${unattempted}) and project_id = ${projectId} and status = 'pending' and attempt_count = 0`;
    }
    const schedule = { runAt: tx`greatest(t.due, now())`, keyMode: tx`case when t.due <= now() then 'replace' else 'preserve_run_at' end` };
    await tx`
      select ${flushJob(tx, endpointId, projectId, schedule)}
      from (select min(coalesce(leased_until, now())) as due from webhook_deliveries
            where endpoint_id = ${endpointId} and project_id = ${projectId} and status = 'pending' and attempt_count = 0) t
      where t.due is not null`;
  });
}

/**
 * Posts an endpoint's unattempted deliveries, oldest first, FLUSH_IN_FLIGHT at a time, claiming
 * the next batch while the last requests of the one before are out. Each delivery is settled on
 * its own answer, exactly as a single attempt would be: retries go to their own `webhook__deliver`
 * job. Once an outcome disables the endpoint, the rest settle as `endpoint_disabled` unsent.
 */
export async function flushEndpoint(sql: Sql, attempter: Attempter, projectId: string, endpointId: string, signal?: AbortSignal) {
  const started = performance.now();
  // Past this age a claimed delivery's lease might run out during its own request.
  const staleAfterMs = LEASE_MS - attempter.transport.timeoutMs - 5_000;
  const claimed: { a: Attempt; at: number }[] = [];
  const unattempted: string[] = [];
  let lastClaimFull = true;
  let endpointOff = false;
  let claiming: Promise<void> | undefined;

  const mayClaim = () => lastClaimFull && !endpointOff && !signal?.aborted && performance.now() - started < FLUSH_BUDGET_MS;
  function claimMore() {
    claiming ??= claim(sql, projectId, endpointId, CLAIM_BATCH)
      .then(({ attempts, full }) => {
        const at = performance.now();
        for (const a of attempts) claimed.push({ a, at });
        lastClaimFull = full;
      })
      .finally(() => { claiming = undefined; });
    return claiming;
  }
  /** The next delivery to attempt; the next claim starts while a round's worth is still waiting. */
  async function next() {
    if (claimed.length <= FLUSH_IN_FLIGHT && mayClaim()) claimMore().catch(() => {});
    while (claimed.length === 0 && mayClaim()) await claimMore();
    return claimed.shift();
  }

  // A lane moves on to its next request once an answer is in, and the outcome commits behind it in
  // a shared transaction. After a failure that counts toward auto-disable the lane waits for the
  // commit instead: the one that disables the endpoint stops the requests not yet out, so no more
  // than the requests already in flight go after it.
  const settling = new Set<Promise<void>>();
  const errors: unknown[] = [];
  const lanes = await Promise.allSettled(Array.from({ length: FLUSH_IN_FLIGHT }, async () => {
    for (let item = await next(); item; item = await next()) {
      if (signal?.aborted || performance.now() - item.at > staleAfterMs) {
        unattempted.push(item.a.id);
        continue;
      }
      const { countsAgainst, settled } = await attempter.attempt(item.a, endpointOff);
      const tracked: Promise<void> = settled.then((endpointStatus) => {
        if (endpointStatus !== undefined && endpointStatus !== 'active') endpointOff = true;
      }).finally(() => settling.delete(tracked));
      tracked.catch((err: unknown) => errors.push(err));
      settling.add(tracked);
      if (countsAgainst) await tracked;
      else if (settling.size >= MAX_SETTLING) await Promise.race(settling).catch(() => {});
    }
  }));
  await Promise.allSettled([...settling]);
  // A claim still on its way when the lanes stopped (a stop or the budget came meanwhile), and
  // whatever the lanes left, are let go rather than left leased with no flush to come.
  await claiming?.catch(() => {});
  unattempted.push(...claimed.splice(0).map((c) => c.a.id));
  await handOver(sql, projectId, endpointId, unattempted);
  const failed = lanes.find((l): l is PromiseRejectedResult => l.status === 'rejected');
  if (failed) throw failed.reason;
  if (errors.length) throw errors[0];
}

/** `webhook__flush`: the first attempts of one endpoint's deliveries. Safe to run twice, or two at once. */
export function webhookFlushTask(deps: AttemptDeps): Task {
  const attempter = createAttempter(deps);
  return async (raw, helpers) => {
    const payload = Payload.parse(raw);
    await flushEndpoint(deps.sql, attempter, payload.project_id, payload.endpoint_id, helpers.abortSignal);
  };
}
