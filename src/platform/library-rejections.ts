import type { Logger } from './log.ts';

/**
 * Rejections that the database client and the job queue leave unhandled when the server ends
 * their connections (a restart, a failover), each with what the process says instead of ending.
 * Both leave nothing half-done that something else does not finish.
 */
const SURVIVABLE: Array<{ matches: (reason: unknown) => boolean; say: string }> = [
  {
    // postgres.js 3.4.9 runs a catalog query first on every new connection and drops its
    // failure (porsager/postgres#1192, #1223). The pool opens another connection, and the query
    // that waited for this one gets the error.
    matches: (reason) => {
      const query = (reason as { query?: unknown } | null)?.query;
      return typeof query === 'string' && /from pg_catalog\.pg_type a\s+left join pg_catalog\.pg_type b on b\.oid = a\.typelem/.test(query);
    },
    say: 'a database connection ended while it was being set up; the pool opens another',
  },
  {
    // graphile-worker 0.18's local queue throws where nothing catches when it cannot give back
    // the jobs it fetched while its pool stops. They stay locked by that pool, which the
    // dead-pool sweep releases, and a new job runner takes over (startWorker).
    matches: (reason) => reason instanceof Error && reason.message.startsWith('Error occurred whilst returning jobs from local queue to database queue'),
    say: 'a stopped job runner could not give back the jobs it had fetched; the dead-pool sweep releases them',
  },
];

/** What the process says instead of ending, for a rejection it survives; undefined for any other. */
function survivableRejection(reason: unknown): string | undefined {
  return SURVIVABLE.find((known) => known.matches(reason))?.say;
}

let installed = false;

/**
 * Node ends the process on an unhandled rejection. For the known ones above it logs instead;
 * any other still ends the process, as Node's default does.
 */
export function surviveKnownLibraryRejections(log: Logger) {
  if (installed) return;
  installed = true;
  process.on('unhandledRejection', (reason) => {
    const say = survivableRejection(reason);
    if (!say) throw reason;
    log.warn({ err: (reason as Error).message }, say);
  });
}
