import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Sql } from './db.ts';

/** The project root: the nearest folder above this module with a `migrations` folder (as migrate.ts finds it). */
const ROOT = (() => {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'migrations')) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  return dir;
})();

let expected: string | null | undefined;

/** The hash graphile-migrate records for the newest committed migration this build carries. */
function newestMigrationHash(): string | null {
  if (expected !== undefined) return expected;
  const folder = path.join(ROOT, 'migrations', 'committed');
  const newest = existsSync(folder) ? readdirSync(folder).filter((f) => f.endsWith('.sql')).sort().at(-1) : undefined;
  expected = newest ? /^--! Hash: (\S+)$/m.exec(readFileSync(path.join(folder, newest), 'utf8'))?.[1] ?? null : null;
  return expected;
}

/** What to run when the schema is behind; said by /readyz's callers and the waiting worker. */
export const MIGRATE_HINT = 'run `npm run --silent cli -- migrate`, or start with MIGRATE_ON_START=1';

let current = false;

/**
 * Whether the database holds every committed migration this build carries (§18.12): 'behind'
 * while any is pending (an empty database included), 'unreachable' when it does not answer.
 * Once current, remembered: a schema only moves forward.
 */
export async function schemaState(sql: Sql): Promise<'current' | 'behind' | 'unreachable'> {
  if (current) return 'current';
  const hash = newestMigrationHash();
  try {
    const [row] = await sql<[{ migrated: boolean }]>`
      select exists (select 1 from graphile_migrate.migrations where hash = ${hash ?? ''}) as migrated`;
    current = row.migrated;
    return current ? 'current' : 'behind';
  } catch (err) {
    // Never migrated: no graphile_migrate schema or table yet.
    if (['42P01', '3F000'].includes((err as { code?: string }).code ?? '')) return 'behind';
    return 'unreachable';
  }
}
