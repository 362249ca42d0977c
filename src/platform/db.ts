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
