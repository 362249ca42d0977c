import type { Task } from 'graphile-worker';
import { z } from 'zod';
import { ServiceError } from '../platform/errors.ts';
import type { WorkerDeps } from '../interfaces.ts';
import { checkDomain } from './service.ts';

export const DomainCheckPayload = z.object({ domainId: z.string().min(1), projectId: z.string().min(1) });

/**
 * `domain__check`: one domain, asked of SES now. Provider errors, a removed domain or a
 * disconnected project are logged and end the job: the next `domain__recheck` tick picks the
 * domain up again while it is still due, so nothing piles up in the retry queue.
 */
export function domainCheckTask(deps: WorkerDeps): Task {
  return async (payload) => {
    const { domainId, projectId } = DomainCheckPayload.parse(payload);
    try {
      const d = await checkDomain(deps.sql, deps.config, domainId, projectId);
      deps.log.debug({ domainId, projectId, verification: d.verificationStatus, dkim: d.dkimStatus }, 'domain checked');
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      deps.log.warn({ domainId, projectId, err: err.message }, 'domain check failed; retrying at the next re-check tick');
    }
  };
}
