import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestDatabase } from '../helpers/db.ts';
import { commitShared } from '../../src/platform/shared-commit.ts';

const { sql } = await createTestDatabase();
await sql`create table shared_commit_probe (id int primary key, note text not null)`;

test('statements submitted together share one transaction and each gets its own rows back', async () => {
  const results = await Promise.all(Array.from({ length: 20 }, (_, i) =>
    commitShared(sql, (tx) => tx<{ id: number }[]>`insert into shared_commit_probe (id, note) values (${i}, 'ok') returning id`)));
  assert.deepEqual(results.map((rows) => rows[0]!.id), Array.from({ length: 20 }, (_, i) => i));
  const [{ txids }] = await sql<[{ txids: number }]>`select count(distinct xmin::text)::int as txids from shared_commit_probe`;
  assert.ok(txids < 20, `20 inserts committed in ${txids} transactions`);
});

test('one failing statement fails only its own caller: the others commit, alone if need be', async () => {
  await sql`delete from shared_commit_probe`;
  const outcomes = await Promise.allSettled([
    commitShared(sql, (tx) => tx`insert into shared_commit_probe (id, note) values (100, 'first') returning id`),
    commitShared(sql, (tx) => tx`insert into shared_commit_probe (id, note) values (101, null) returning id`),
    commitShared(sql, (tx) => tx`insert into shared_commit_probe (id, note) values (102, 'third') returning id`),
  ]);
  assert.deepEqual(outcomes.map((o) => o.status), ['fulfilled', 'rejected', 'fulfilled']);
  assert.match(String((outcomes[1] as PromiseRejectedResult).reason), /null value/);
  const rows = await sql<{ id: number }[]>`select id from shared_commit_probe order by id`;
  assert.deepEqual(rows.map((r) => r.id), [100, 102]);
});
