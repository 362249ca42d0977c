import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import postgres from 'postgres';
import { randomBytes } from 'node:crypto';
import { applyViews, migrateDatabase } from '../../src/platform/migrate.ts';
import { startEmbeddedPostgres } from '../../src/platform/embedded-db.ts';

/**
 * Once per `npm test`: find a PostgreSQL (TEST_DATABASE_URL, then 127.0.0.1:5432, then an
 * embedded one), build a template database from the migrations, and hand its name to the test
 * files through the environment. Each test file clones the template (see db.ts).
 */
let embedded: { stop(): Promise<void> } | undefined;
let adminUrl = '';
let template = '';

async function answers(url: string) {
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

function withDatabase(url: string, database: string) {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

export async function globalSetup() {
  // The production bundle, which the tests start their API, worker and CLI processes from.
  execFileSync(process.execPath, [path.resolve('scripts/build.mjs')], { stdio: 'inherit' });
  const candidates = [process.env.TEST_DATABASE_URL, 'postgres://postgres@127.0.0.1:5432/postgres'].filter(Boolean) as string[];
  for (const url of candidates) {
    if (await answers(url)) { adminUrl = url; break; }
  }
  if (!adminUrl) {
    process.stdout.write('# no PostgreSQL at TEST_DATABASE_URL or 127.0.0.1:5432; starting an embedded one\n');
    const pg = await startEmbeddedPostgres({ dir: path.resolve('.data/test-pg'), database: 'postgres' });
    embedded = pg;
    adminUrl = pg.url;
  }
  template = `mailroom_tpl_${randomBytes(4).toString('hex')}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${template}`);
  await admin.end();
  await migrateDatabase(withDatabase(adminUrl, template), { views: false });
  // Uncommitted schema work in migrations/current.sql applies too, as `graphile-migrate watch` would,
  // and the ops views after it, as after any migration.
  const current = await readFile(path.resolve('migrations/current.sql'), 'utf8');
  const tpl = postgres(withDatabase(adminUrl, template), { max: 1, onnotice: () => {} });
  if (current.replace(/--.*$/gm, '').trim()) await tpl.unsafe(current);
  await applyViews(tpl);
  await tpl.end();
  process.env.MAILROOM_TEST_ADMIN_URL = adminUrl;
  process.env.MAILROOM_TEST_TEMPLATE = template;
}

export async function globalTeardown() {
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    const leftovers = await admin<{ datname: string }[]>`
      select datname from pg_database where datname = ${template} or datname like ${`${template}_%`}`;
    for (const { datname } of leftovers) await admin.unsafe(`drop database if exists "${datname}" with (force)`);
  } finally {
    await admin.end();
    await embedded?.stop();
  }
}
