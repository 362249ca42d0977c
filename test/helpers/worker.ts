import { beforeDrop } from './db.ts';
import type { Config } from '../../src/platform/config.ts';
import type { Sql } from '../../src/platform/db.ts';
import { createLogger } from '../../src/platform/log.ts';
import { startWorkerRole } from '../../src/platform/runtime.ts';
import type { WorkerDeps } from '../../src/interfaces.ts';

/**
 * The worker process's parts (graphile-worker with every task, plus the worker's services such
 * as the SMTP sink) running in this test process against the test database. Stopped before the
 * file's database is dropped.
 */
export async function startTestWorker(config: Config, sql: Sql, opts: { crontab?: boolean; webhooks?: WorkerDeps['webhooks'] } = {}) {
  const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent', 'test-worker');
  const role = await startWorkerRole({ config, sql, log, webhooks: opts.webhooks }, { crontab: opts.crontab ?? false });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    for (const [, close] of role.steps) await close();
  };
  beforeDrop(stop);
  return { poolId: role.poolId, stop };
}
