import type { Logger } from './log.ts';

export const SHUTDOWN_BUDGET_MS = 10_000;

/**
 * Runs the closers in order on SIGTERM/SIGINT (listener, then jobs, then pools), bounded so a
 * stuck step cannot keep the process alive past the budget.
 */
export function onShutdown(log: Logger, steps: Array<[name: string, close: () => Promise<unknown>]>) {
  let stopping = false;
  const handler = async (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    const deadline = setTimeout(() => {
      log.error('shutdown exceeded its budget; exiting');
      process.exit(1);
    }, SHUTDOWN_BUDGET_MS + 2000);
    deadline.unref();
    for (const [name, close] of steps) {
      try {
        await close();
      } catch (err) {
        log.warn({ err, step: name }, 'shutdown step failed');
      }
    }
    log.info('stopped');
    process.exit(0);
  };
  process.once('SIGTERM', handler);
  process.once('SIGINT', handler);
}
