import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestDatabase } from '../helpers/db.ts';
import { commitShared } from '../../src/platform/shared-commit.ts';
import { createSql, withReservedConnection } from '../../src/platform/db.ts';

const { sql, url } = await createTestDatabase();
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

test('a shared transaction whose connection the server ends leaves the pool working', async () => {
  const pool = createSql(url, { max: 2, appName: 'shared-commit-victim' });
  try {
    await sql`delete from shared_commit_probe`;
    // Two statements at once go out together on one reserved connection; the first sleeps.
    const first = Promise.allSettled([
      commitShared(pool, (tx) => tx`select pg_sleep(1)`),
      commitShared(pool, (tx) => tx`insert into shared_commit_probe (id, note) values (200, 'before') returning id`),
    ]);
    await terminateWhenSleeping('shared-commit-victim');
    // Each runs again alone after its shared transaction failed.
    assert.deepEqual((await first).map((o) => o.status), ['fulfilled', 'fulfilled']);

    // The ended connection must not come back to the pool: the next shared transactions and
    // plain queries go through.
    const after = await withinSeconds(10, Promise.all([
      commitShared(pool, (tx) => tx<{ id: number }[]>`insert into shared_commit_probe (id, note) values (201, 'after') returning id`),
      commitShared(pool, (tx) => tx<{ id: number }[]>`insert into shared_commit_probe (id, note) values (202, 'after') returning id`),
      pool`select 1 as one`,
    ]));
    assert.deepEqual(after.slice(0, 2).map((rows) => rows[0]!.id), [201, 202]);
    const rows = await sql<{ id: number }[]>`select id from shared_commit_probe order by id`;
    assert.deepEqual(rows.map((r) => r.id), [200, 201, 202]);
  } finally {
    await pool.end({ timeout: 1 });
  }
});

test('a shared transaction waiting for a connection the server ends still commits', async () => {
  const pool = createSql(url, { max: 1, appName: 'shared-commit-queued' });
  try {
    await sql`delete from shared_commit_probe`;
    const busy = pool`select pg_sleep(1)`.catch((err: unknown) => err);
    await new Promise((r) => setTimeout(r, 50));
    // The pool's only connection is busy: these two wait for it, to be written back to back.
    const waiting = Promise.all([300, 301].map((id) =>
      commitShared(pool, (tx) => tx<{ id: number }[]>`insert into shared_commit_probe (id, note) values (${id}, 'queued') returning id`)));
    await terminateWhenSleeping('shared-commit-queued');
    await busy;
    const done = await withinSeconds(30, waiting);
    assert.deepEqual(done.map((rows) => rows[0]!.id), [300, 301]);
  } finally {
    await pool.end({ timeout: 1 });
  }
});

test('waiting for a connection of its own is bounded, and one that comes later goes back to the pool', async () => {
  const pool = createSql(url, { max: 1, appName: 'shared-commit-bounded' });
  try {
    const busy = pool`select pg_sleep(0.5)`.execute();
    await new Promise((r) => setTimeout(r, 50));
    let ran = false;
    await assert.rejects(withReservedConnection(pool, async () => { ran = true; }, { waitMs: 100 }), /no database connection came free within 0.1 s/);
    assert.equal(ran, false);
    await busy;
    // The reservation answered after the caller gave up is released: the one connection serves again.
    const [{ one }] = await withinSeconds(5, pool<[{ one: number }]>`select 1 as one`);
    assert.equal(one, 1);
  } finally {
    await pool.end({ timeout: 1 });
  }
});

test('work on a held connection that does not answer in time fails its caller, and the connection goes back once it does', async () => {
  const pool = createSql(url, { max: 1, appName: 'shared-commit-slow-work' });
  try {
    let settled = false;
    await assert.rejects(
      withReservedConnection(pool, async (connection) => { await connection`select pg_sleep(0.5)`; settled = true; }, { workMs: 100 }),
      /the database did not answer within 0.1 s/,
    );
    assert.equal(settled, false);
    const [{ one }] = await withinSeconds(5, pool<[{ one: number }]>`select 1 as one`);
    assert.equal(one, 1);
    assert.equal(settled, true, 'the pool served again only after the slow work had finished');
  } finally {
    await pool.end({ timeout: 1 });
  }
});

async function terminateWhenSleeping(appName: string) {
  for (let i = 0; i < 200; i++) {
    const [victim] = await sql<{ pid: number }[]>`
      select pid from pg_stat_activity where application_name = ${appName} and query like '%pg_sleep%' and state = 'active'`;
    if (victim) {
      await sql`select pg_terminate_backend(${victim.pid})`;
      return;
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('the statement never started');
}

function withinSeconds<T>(seconds: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    work,
    new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`no answer within ${seconds} s`)), seconds * 1000); }),
  ]).finally(() => clearTimeout(timer));
}
