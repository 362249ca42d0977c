import { beforeDrop } from './db.ts';
import type { Config } from '../../src/platform/config.ts';
import type { Sql } from '../../src/platform/db.ts';
import { createLogger } from '../../src/platform/log.ts';
import { startWorker } from '../../src/platform/worker.ts';
import { buildCrontab, buildTaskList, startWorkerServices } from '../../src/tasks.ts';

/**
 * The worker process's parts (graphile-worker with every task, plus the worker's services such
 * as the SMTP sink) running in this test process against the test database. Stopped after the file.
 */
export async function startTestWorker(config: Config, sql: Sql, opts: { crontab?: boolean } = {}) {
  const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent', 'test-worker');
  const deps = { config, sql, log };
  const services = await startWorkerServices(deps);
  const worker = await startWorker({
    databaseUrl: config.databaseUrl,
    sql,
    log,
    concurrency: config.workerConcurrency,
    taskList: buildTaskList(deps),
    crontab: opts.crontab ? buildCrontab(deps) : [],
  });
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await worker.stop();
    for (const [, close] of services) await close();
  };
  beforeDrop(stop);
  return { worker, stop };
}
