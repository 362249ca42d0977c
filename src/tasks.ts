import type { CronItem, TaskList } from 'graphile-worker';
import type { Config } from './platform/config.ts';
import type { Sql } from './platform/db.ts';
import type { Logger } from './platform/log.ts';

export type WorkerDeps = { config: Config; sql: Sql; log: Logger };

/** Every graphile-worker task, named `noun__verb`, one file each in its capability folder. */
export function buildTaskList(_deps: WorkerDeps): TaskList {
  return {};
}

export function buildCrontab(_deps: WorkerDeps): CronItem[] {
  return [];
}

/** Long-running services the worker process hosts besides jobs (the SMTP sink, queue polling). */
export async function startWorkerServices(_deps: WorkerDeps): Promise<Array<[string, () => Promise<unknown>]>> {
  return [];
}
