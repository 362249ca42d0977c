import type { Logger } from './log.ts';

export const SHUTDOWN_BUDGET_MS = 10_000;

/** What a replaced job runner's database pool answers every request with. */
export const REPLACED_RUNNER_REFUSAL = 'this job runner was replaced; its jobs were released to the new one';

export type ShutdownStep = [name: string, close: () => Promise<unknown>];

/**
 * On SIGTERM/SIGINT, runs the closers in order (listener, then jobs, then pools) within one
 * shared budget. A step still running when the budget is spent is abandoned and the rest run
 * anyway: jobs cut short are released by the dead-pool sweep and run again elsewhere.
 * Returns the same shutdown for a process that must stop on its own, with its exit code.
 */
export function onShutdown(log: Logger, steps: ShutdownStep[]): (exitCode: number) => Promise<void> {
  let stopping = false;
  const shutdown = async (exitCode: number, signal?: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal, exitCode }, 'shutting down');
    await runSteps(log, steps, Date.now() + SHUTDOWN_BUDGET_MS);
    log.info('stopped');
    process.exit(exitCode);
  };
  process.once('SIGTERM', (signal) => void shutdown(0, signal));
  process.once('SIGINT', (signal) => void shutdown(0, signal));
  // A rejection nothing handled (a library's own during a database outage, say) ends the process
  // with 1, as Node would, but through the same shutdown and with its reason logged.
  process.on('unhandledRejection', (reason) => {
    // A library's own work that failed because the database is away (graphile-worker returning a
    // shut-down runner's jobs, say) is the outage, not a fault of the process: it rides through.
    if (isDatabaseUnreachable(reason)) {
      log.warn({ err: (reason as Error).message }, 'a background task failed while the database was unreachable');
      return;
    }
    // A replaced job runner is cut off from the database on purpose (platform/worker.ts), and
    // graphile-worker does not handle every refusal it then meets.
    if (reason instanceof Error && reason.message.includes(REPLACED_RUNNER_REFUSAL)) {
      log.info({ err: reason.message }, 'late work of a replaced job runner refused');
      return;
    }
    log.fatal({ err: reason instanceof Error ? reason.message : String(reason) }, 'unhandled promise rejection; shutting down');
    void shutdown(1);
  });
  return shutdown;
}

export async function runSteps(log: Logger, steps: ShutdownStep[], deadline: number) {
  for (const [name, close] of steps) {
    // Pools and listeners still get a moment to close after the budget is spent.
    const remaining = Math.max(deadline - Date.now(), 500);
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      close().then(() => 'done' as const, (err: unknown) => err),
      new Promise<'timeout'>((resolve) => { timer = setTimeout(() => resolve('timeout'), remaining); }),
    ]);
    clearTimeout(timer);
    if (outcome === 'timeout') log.warn({ step: name }, 'shutdown step did not finish within the budget; moving on');
    else if (outcome !== 'done') log.warn({ err: outcome, step: name }, 'shutdown step failed');
  }
}

/** Connection-level failures: the server refused, ended or dropped the connection, or is starting or stopping. */
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'CONNECT_TIMEOUT', '57P01', '57P02', '57P03', '08000', '08003', '08006']);

function isDatabaseUnreachable(reason: unknown): boolean {
  const err = reason as { code?: string; message?: string; errors?: unknown[]; cause?: unknown } | undefined;
  if (!err || typeof err !== 'object') return false;
  if (err.code && UNREACHABLE_CODES.has(err.code)) return true;
  if (Array.isArray(err.errors) && err.errors.length > 0 && err.errors.every(isDatabaseUnreachable)) return true;
  if (err.cause && isDatabaseUnreachable(err.cause)) return true;
  return /ECONNREFUSED|ECONNRESET|EPIPE|Connection terminated|terminating connection|the database system is (starting up|shutting down|in recovery)|not queryable|not currently accepting connections/.test(err.message ?? '');
}
