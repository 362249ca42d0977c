import type { Task } from 'graphile-worker';
import { z } from 'zod';
import type { WorkerDeps } from '../../interfaces.ts';
import { finishImport } from './queries.ts';
import { runImportOnThread } from './thread.ts';

const Payload = z.object({ import_id: z.string().min(1), project_id: z.string().min(1) });

/**
 * `contacts_import__run`: one import, from its cursor to the end. Safe to run again at any point
 * (a retry or a worker that died): the row's cursor says where to go on, and a run that finds the
 * import finished does nothing. The last attempt that fails marks the import `failed`. The rows
 * are read on a thread of their own (thread.ts).
 */
export function contactsImportRunTask(deps: WorkerDeps): Task {
  return async (payload, helpers) => {
    const { import_id: importId, project_id: projectId } = Payload.parse(payload);
    try {
      await runImportOnThread({ databaseUrl: deps.config.databaseUrl, projectId, importId });
      deps.log.debug({ importId, projectId }, 'contact import ran');
    } catch (err) {
      if (helpers.job.attempts >= helpers.job.max_attempts) {
        await finishImport(deps.sql, projectId, importId, 'failed', 'the import could not be completed; the worker log has the cause');
      }
      throw err;
    }
  };
}
