import postgres from 'postgres';

export type Sql = postgres.Sql<{}>;
export type TxSql = postgres.TransactionSql<{}>;

/**
 * One pool per process. Column names come back camelCase; JSON values are left alone so
 * caller-supplied keys (custom headers) survive untouched.
 */
export function createSql(url: string, options: { max?: number; appName?: string } = {}): Sql {
  return postgres(url, {
    max: options.max ?? 10,
    transform: { column: { from: postgres.toCamel }, undefined: null },
    connection: { application_name: options.appName ?? 'mailroom' },
    onnotice: () => {},
  });
}

/**
 * Runs a constant statement unprepared, so PostgreSQL plans it for the values at hand each time.
 * A prepared statement keeps the generic plan it made first; one made while the tables were small
 * scans them whole, and nothing replaces it until the next ANALYZE. For the few hot statements
 * whose only good plan is an index lookup. The text never varies; values are always parameters.
 * It costs a round trip more than a prepared statement (postgres.js has PostgreSQL describe the
 * parameters first) and cannot be pipelined; on a hot path, a PL/pgSQL function that EXECUTEs the
 * statement is planned per call just the same and can be called prepared (see `sink_prune`).
 */
export function plannedEachTime<T extends postgres.Row[]>(sql: Sql | TxSql, text: string, params: unknown[]) {
  return sql.unsafe<T>(text, params as never[], { prepare: false });
}

/** Round-trips the database, bounded so a hung connection cannot stall readiness. */
export async function pingDatabase(sql: Sql, timeoutMs = 1000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const query = sql`select 1 as ok`;
    const result = await Promise.race([
      query,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => { query.cancel(); reject(new Error('timeout')); }, timeoutMs);
      }),
    ]);
    return result[0]?.ok === 1;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
