import type { Task } from 'graphile-worker';
import { z } from 'zod';
import { ServiceError } from '../platform/errors.ts';
import type { WorkerDeps } from '../interfaces.ts';
import { checkDomain } from './service.ts';

/** Payloads name their ids in snake_case, like every job's; the camelCase spelling of older queued jobs is still read. */
export const DomainCheckPayload = z.union([
  z.object({ domain_id: z.string().min(1), project_id: z.string().min(1) }),
  z.object({ domainId: z.string().min(1), projectId: z.string().min(1) })
    .transform((p) => ({ domain_id: p.domainId, project_id: p.projectId })),
]);

/**
 * `domain__check`: one domain, asked of SES now. Provider errors, a removed domain or a
 * disconnected project are logged and end the job: the next `domain__recheck` tick picks the
 * domain up again while it is still due, so nothing piles up in the retry queue.
 */
export function domainCheckTask(deps: WorkerDeps): Task {
  return async (payload) => {
    const { domain_id: domainId, project_id: projectId } = DomainCheckPayload.parse(payload);
    try {
      const d = await checkDomain(deps.sql, deps.config, projectId, domainId);
      deps.log.debug({ domainId, projectId, verification: d.verificationStatus, dkim: d.dkimStatus }, 'domain checked');
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      deps.log.warn({ domainId, projectId, err: err.message }, 'domain check failed; retrying at the next re-check tick');
    }
  };
}
