import { parentPort, workerData } from 'node:worker_threads';
import { serveTemplates } from './templates/thread.ts';

// The template thread's entry (src/templates/threads.ts starts it): see src/templates/thread.ts.
serveTemplates(parentPort!, (workerData as { cacheBytes: number }).cacheBytes);
