import { after } from 'node:test';
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { createSql, type Sql } from '../../src/platform/db.ts';

const beforeDropHooks: Array<() => Promise<void>> = [];

/** Registers a stop step that must run before this file's databases are dropped. */
export function beforeDrop(stop: () => Promise<void>) {
  beforeDropHooks.push(stop);
}

export function adminUrl(): string {
  const url = process.env.MAILROOM_TEST_ADMIN_URL;
  if (!url) throw new Error('run tests through `npm test` (the global setup builds the template database)');
  return url;
}

export function urlFor(database: string): string {
  const u = new URL(adminUrl());
  u.pathname = `/${database}`;
  return u.toString();
}

/**
 * A fresh database cloned from the migrated template, dropped when the test file ends.
 * Real PostgreSQL, never a mock: graphile-worker, constraints and locks all behave as in production.
 */
export async function createTestDatabase(opts: { empty?: boolean } = {}): Promise<{ url: string; sql: Sql; name: string }> {
  const template = opts.empty ? 'template0' : process.env.MAILROOM_TEST_TEMPLATE!;
  const name = `${process.env.MAILROOM_TEST_TEMPLATE!}_${randomBytes(5).toString('hex')}`;
  const admin = postgres(adminUrl(), { max: 1, onnotice: () => {} });
  // CREATE DATABASE … TEMPLATE fails while anyone else is connected to the template; retry briefly.
  for (let attempt = 0; ; attempt++) {
    try {
      await admin.unsafe(`create database "${name}" template "${template}"`);
      break;
    } catch (err) {
      if (attempt > 50 || !/being accessed by other users/.test((err as Error).message)) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  await admin.end();
  const url = urlFor(name);
  const sql = createSql(url, { max: 10, appName: 'mailroom-test' });
  after(async () => {
    // Whatever still uses the database (a worker, a server) stops before it is dropped.
    for (const stop of beforeDropHooks.splice(0).reverse()) await stop();
    await sql.end({ timeout: 1 });
    const a = postgres(adminUrl(), { max: 1, onnotice: () => {} });
    await a.unsafe(`drop database if exists "${name}" with (force)`).catch(() => {});
    await a.end();
  });
  return { url, sql, name };
}
