import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { serveTemplates } from './templates/thread.ts';

// The template thread's entry (src/templates/threads.ts starts it): see src/templates/thread.ts.

// Renders yield the CPU to the event loop that answers every project: on Linux a thread has its
// own nice value, named by its thread id. Elsewhere the thread keeps the process's priority.
try {
  setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), 5);
} catch { /* not Linux */ }

serveTemplates(parentPort!, (workerData as { cacheBytes: number }).cacheBytes);
