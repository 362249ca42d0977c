import type { Sql } from '../platform/db.ts';
import type { Logger } from '../platform/log.ts';
import { GroupCommit, groupCommitPerPool } from '../platform/group-commit.ts';
import { recordTrackingEvent, recordTrackingHitsUnrecorded } from '../platform/metrics.ts';
import { recordHitsStatement, type TrackingHit } from './queries.ts';

/**
 * Opens and clicks are recorded after the answer has gone, through a group commit like accept's:
 * the hits of one moment share one transaction (one WAL flush, one NOTIFY for their webhook
 * flushes), so a burst of opens costs what a burst of sends does.
 */
const committerFor = groupCommitPerPool((sql) => new GroupCommit<TrackingHit, void>(
  async (hits) => {
    const [row] = await recordHitsStatement(sql, hits);
    const types = row?.types ?? [];
    for (const type of types) recordTrackingEvent(type as TrackingHit['type']);
    if (types.length < hits.length) recordTrackingHitsUnrecorded(hits.length - types.length);
    return hits.map(() => undefined);
  },
  { maxInFlight: 4 },
));

const inFlight = new Set<Promise<void>>();

/** Records a hit in the background; a failure is logged, never the visitor's problem. */
export function recordHit(sql: Sql, log: Logger, hit: TrackingHit) {
  const recording = committerFor(sql).run(hit)
    .catch((err: unknown) => log.error({ err, emailId: hit.emailId, projectId: hit.projectId, type: hit.type }, 'tracking event not recorded'))
    .finally(() => inFlight.delete(recording));
  inFlight.add(recording);
}

/** Waits for the hits already answered to be recorded, so a shutdown does not drop them. */
export async function hitsRecorded() {
  await Promise.allSettled([...inFlight]);
}
