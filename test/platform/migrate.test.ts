import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { createTestDatabase } from '../helpers/db.ts';
import { migrateDatabase } from '../../src/platform/migrate.ts';

test('migrating leaves no connection behind: a database restart right after cannot end the process', async () => {
  const { url, sql, name } = await createTestDatabase({ empty: true });
  const { applied } = await migrateDatabase(url);
  assert.ok(applied > 0);
  // graphile-migrate exits the process when an idle connection of its pool fails; none is left.
  const others = await sql`
    select pid from pg_stat_activity where datname = ${name} and pid <> pg_backend_pid() and application_name <> 'mailroom-test'`;
  assert.equal(others.length, 0, 'no connection of the migration outlives migrateDatabase');
  await sql`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${name} and pid <> pg_backend_pid()`;
  await sleep(300);
  assert.equal((await sql`select count(*)::int as n from graphile_migrate.migrations`)[0]!.n, applied, 'still here, and the migrations stand');
});
