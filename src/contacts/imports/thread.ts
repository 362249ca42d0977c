import { Worker } from 'node:worker_threads';
import { createSql } from '../../platform/db.ts';
import { runImport } from './run.ts';

/**
 * An import runs on a thread of its own with a capped heap. Parsing and checking a million rows
 * allocates fast, and on the worker's main thread V8 answered by growing its young generation to
 * 128 MB; the cap keeps a million-row import's worker under 300 MB of RSS, and the main thread's
 * other jobs out of its pauses.
 */
const YOUNG_MB = 16;
const OLD_MB = 192;

const ENTRY = import.meta.url.endsWith('.ts')
  ? new URL('../../contacts-import-thread.ts', import.meta.url)
  // The production bundle puts the thread's entry beside the chunk this code is in.
  : new URL('./contacts-import-thread.js', import.meta.url);

export type ThreadData = { databaseUrl: string; projectId: string; importId: string };

/** Runs the import on a new thread until it ends; its error, if any, is the caller's. */
export function runImportOnThread(data: ThreadData): Promise<void> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(ENTRY, { workerData: data, resourceLimits: { maxYoungGenerationSizeMb: YOUNG_MB, maxOldGenerationSizeMb: OLD_MB } });
    let failed: Error | undefined;
    worker.once('error', (err) => { failed = err; });
    worker.once('exit', (code) => (failed ?? code !== 0 ? reject(failed ?? new Error(`the import thread exited with ${code}`)) : resolve()));
  });
}

/** The thread's side: its own small pool, closed when the import ends. */
export async function runImportInThisThread(data: ThreadData) {
  const sql = createSql(data.databaseUrl, { max: 2, appName: 'mailroom-import' });
  try {
    await runImport(sql, data.projectId, data.importId);
  } finally {
    await sql.end({ timeout: 5 });
  }
}
