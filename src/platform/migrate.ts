import { existsSync } from 'node:fs';
import { mkdtemp, mkdir, readdir, readFile, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { migrate as runCommittedMigrations, Logger as MigrateLogger } from 'graphile-migrate';
import { runMigrations as installWorkerSchema, Logger as WorkerLogger } from 'graphile-worker';
import postgres from 'postgres';
import {
  movePartitionsInSteps, moveRecipientsInSteps, partitionMoveNeeded, PARTITIONS_MIGRATION, RECIPIENTS_MIGRATION, recipientsMoveNeeded,
} from './partition-upgrade.ts';

/**
 * The project root: the nearest folder above this module with a `migrations` folder. The same
 * from the sources (src/platform/) and from the bundle (dist/).
 */
const ROOT = (() => {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'migrations')) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  return dir;
})();
/** Distinct from graphile-migrate's own try-lock, which would fail rather than wait. */
const MIGRATION_LOCK = 7243_6276_6401n;
/**
 * graphile-migrate keeps its connection pool 200 ms after its last use, and exits the process if
 * an idle connection of that pool fails, as every one does when the database restarts. A process
 * that migrates as it starts waits for that pool to be gone before it goes on, so a restart in
 * those moments is one it rides through like any other.
 */
const MIGRATE_POOL_KEEPALIVE_MS = 200;

/**
 * Applies committed migrations, graphile-worker's schema, then the ops views, holding a
 * blocking advisory lock so replicas starting together queue up instead of colliding.
 * Returns how many committed migrations this run applied.
 */
export async function migrateDatabase(databaseUrl: string, opts: { views?: boolean } = {}): Promise<{ applied: number }> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  let migratePoolUsedAt: number | undefined;
  try {
    return await sql.begin(async (lock) => {
      await lock`select pg_advisory_xact_lock(${MIGRATION_LOCK.toString()}::bigint)`;
      const before = await countApplied(lock);
      const committed = async (folder: string) => {
        try {
          await runCommittedMigrations({ connectionString: databaseUrl, migrationsFolder: folder, logger: quietLogger } as never);
        } finally {
          migratePoolUsedAt = performance.now();
        }
      };
      // Each move that one committed migration would make in a single transaction over every day
      // of history: the migrations before it, then the move a day at a time, which it finds done.
      for (const move of STEPPED_MOVES) {
        if (!(await moveAhead(lock, move))) continue;
        await withMigrationsBefore(move.before, committed);
        const steps = postgres(databaseUrl, { max: 1, onnotice: () => {}, transform: { column: { from: postgres.toCamel } } });
        try {
          await move.run(steps);
        } finally {
          await steps.end();
        }
      }
      await committed(path.join(ROOT, 'migrations'));
      await installWorkerSchema({ connectionString: databaseUrl, logger: quietWorkerLogger });
      if (opts.views !== false) await applyViews(lock);
      return { applied: (await countApplied(lock)) - before };
    });
  } finally {
    await sql.end();
    if (migratePoolUsedAt !== undefined) {
      const left = migratePoolUsedAt + MIGRATE_POOL_KEEPALIVE_MS + 50 - performance.now();
      if (left > 0) await sleep(left);
    }
  }
}

/** The ops views (sql/*.sql), defined again over whatever the migrations left. */
export async function applyViews(sql: postgres.Sql | postgres.TransactionSql) {
  for (const file of (await readdir(path.join(ROOT, 'sql'))).filter((f) => f.endsWith('.sql')).sort()) {
    await sql.unsafe(await readFile(path.join(ROOT, 'sql', file), 'utf8'));
  }
}

type SteppedMove = {
  before: string;
  needed: (sql: postgres.TransactionSql) => Promise<boolean>;
  run: (sql: postgres.Sql) => Promise<number>;
};

/** The moves done in steps (src/platform/partition-upgrade.ts), in migration order. */
const STEPPED_MOVES: SteppedMove[] = [
  { before: PARTITIONS_MIGRATION, needed: partitionMoveNeeded, run: movePartitionsInSteps },
  { before: RECIPIENTS_MIGRATION, needed: recipientsMoveNeeded, run: moveRecipientsInSteps },
];

/** True when committed migrations stop before `move`'s and the database needs it done. */
async function moveAhead(sql: postgres.TransactionSql, move: SteppedMove): Promise<boolean> {
  const [exists] = await sql`select to_regclass('graphile_migrate.migrations') is not null as present`;
  if (!exists?.present) return false;
  const [last] = await sql<{ filename: string }[]>`select filename from graphile_migrate.migrations order by filename desc limit 1`;
  if (!last || last.filename >= move.before) return false;
  return move.needed(sql);
}

/** Runs `apply` over a folder holding only the committed migrations before `filename`. */
async function withMigrationsBefore(filename: string, apply: (folder: string) => Promise<void>) {
  const folder = await mkdtemp(path.join(tmpdir(), 'mailroom-migrations-'));
  try {
    await mkdir(path.join(folder, 'committed'));
    const number = filename.replace(/\.sql$/, '');
    for (const file of await readdir(path.join(ROOT, 'migrations', 'committed'))) {
      if (file.endsWith('.sql') && file.slice(0, number.length) < number) {
        await symlink(path.join(ROOT, 'migrations', 'committed', file), path.join(folder, 'committed', file));
      }
    }
    await apply(folder);
  } finally {
    await rm(folder, { recursive: true, force: true });
  }
}

async function countApplied(sql: postgres.TransactionSql): Promise<number> {
  const [exists] = await sql`select to_regclass('graphile_migrate.migrations') is not null as present`;
  if (!exists?.present) return 0;
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from graphile_migrate.migrations`;
  return row!.n;
}

const quietLogger = new MigrateLogger(() => (level: string, message: string) => {
  if (level === 'error') process.stderr.write(`${message}\n`);
});
const quietWorkerLogger = new WorkerLogger(() => (level, message) => {
  if (level === 'error') process.stderr.write(`${message}\n`);
});
