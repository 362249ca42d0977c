import { workerData } from 'node:worker_threads';
import { runImportInThisThread, type ThreadData } from './contacts/imports/thread.ts';

// The contact import thread's entry (src/contacts/imports/thread.ts starts it).
await runImportInThisThread(workerData as ThreadData);
