import os from 'node:os';
import type pg from 'pg';
import type { LeaseHolder } from '../interfaces.ts';

/**
 * How long a claim holds the email. It outlasts one attempt (the SES call gives up after 30 s),
 * and a worker that dies leaves it to others once its pool stops heartbeating, or at the latest
 * when this runs out.
 */
export const LEASE_SECONDS = 45;

/**
 * After an outage, before this process's new job runner fetches anything (and before the old
 * runner's jobs are released to any runner): the holder beats, and the leases of the sends it is
 * still working on or has yet to record run again from now. A database away for longer than a
 * lease (a failover) thus never hands another runner an email this process has sent, or is
 * sending; its record follows as soon as the database answers. Nothing is re-asserted once the
 * holder was declared ended: its leases are forfeit, and the email may already be another's.
 *
 * node-postgres on the caller's fresh connection rather than postgres.js, whose pool may still
 * hold connections the server ended (see startWorker's restart).
 */
export async function reassertLeases(db: pg.Pool, holder: LeaseHolder): Promise<number> {
  const ids = [...holder.busy.keys()];
  const projectIds = ids.map((id) => holder.busy.get(id)!);
  const { rowCount } = await db.query(`
    with holder as (
      insert into worker_heartbeats (pool_id, hostname, pid) values ($1, $2, $3)
      on conflict (pool_id) do update set last_seen_at = now() where worker_heartbeats.ended_at is null
      returning pool_id
    )
    update emails e set lease_expires_at = greatest(e.lease_expires_at, now() + make_interval(secs => $6))
    from holder, unnest($4::text[], $5::text[]) as held(id, project_id)
    where e.id = held.id and e.project_id = held.project_id and e.status = 'sending'
      and split_part(e.lease_owner, '/', 1) = holder.pool_id`,
  [holder.id, os.hostname(), process.pid, ids, projectIds, LEASE_SECONDS]);
  return rowCount ?? 0;
}
