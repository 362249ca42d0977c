import { execFile } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { userInfo } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after } from 'node:test';
import postgres from 'postgres';
import { readFile } from 'node:fs/promises';
import { freePort } from './worker-process.ts';
import { applyViews, migrateDatabase } from '../../src/platform/migrate.ts';

const run = promisify(execFile);
const BIN = '/usr/lib/postgresql/15/bin';

/**
 * A PostgreSQL of the test's own, in a temporary directory on a free loopback port, for tests
 * that stop and start the server (never the shared one). As root it runs as the system user
 * `postgres`, as PostgreSQL requires. Stopped and removed when the file ends.
 */
export async function startPrivatePostgres(opts: { maxConnections?: number } = {}) {
  const dir = mkdtempSync('/tmp/mailroom-pg-');
  const data = path.join(dir, 'data');
  const asRoot = userInfo().uid === 0;
  if (asRoot) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    chownSync(dir, Number(stdout.trim()), Number(gid.trim()));
  }
  const pg = (tool: string, args: string[]) => (asRoot ? run('runuser', ['-u', 'postgres', '--', path.join(BIN, tool), ...args]) : run(path.join(BIN, tool), args));
  const port = await freePort();
  await pg('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c max_connections=${opts.maxConnections ?? 200}`;
  const ctl = (...args: string[]) => pg('pg_ctl', ['-D', data, '-l', path.join(dir, 'log'), '-w', '-t', '30', '-o', options, ...args]);
  await ctl('start');
  let running = true;
  const urlFor = (database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const server = {
    port,
    urlFor,
    /** Stops the server the way a restart or failover does: every connection is ended. */
    async stop() {
      await ctl('stop', '-m', 'fast').catch(async (err: Error) => {
        // The server's own log says what it waited for.
        const log = await readFile(path.join(dir, 'log'), 'utf8').catch(() => '');
        throw new Error(`${err.message}\n--- server log\n${log.split('\n').slice(-40).join('\n')}`);
      });
      running = false;
    },
    async start() { await ctl('start'); running = true; },
    /** A database migrated as the test template is (committed migrations, current.sql, views). */
    async createDatabase(name: string) {
      const admin = postgres(urlFor('postgres'), { max: 1, onnotice: () => {} });
      await admin.unsafe(`create database "${name}"`);
      await admin.end();
      const url = urlFor(name);
      await migrateDatabase(url, { views: false });
      const current = await readFile(path.resolve('migrations/current.sql'), 'utf8');
      const db = postgres(url, { max: 1, onnotice: () => {} });
      if (current.replace(/--.*$/gm, '').trim()) await db.unsafe(current);
      await applyViews(db);
      await db.end();
      return url;
    },
  };
  after(async () => {
    if (running) await ctl('stop', '-m', 'immediate').catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  });
  return server;
}
