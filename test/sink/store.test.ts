import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { insertSinkMessage, sinkStatementCounts } from '../../src/sink/store.ts';

const ctx = await createTestContext();

test('many concurrent deliveries to one project leave exactly the newest `keep` messages', async () => {
  const t = await ctx.tenant();
  const other = await ctx.tenant();
  const message = (subject: string, projectId: string) => ({
    projectId, emailId: null, raw: Buffer.from(`Subject: ${subject}\r\n\r\nbody`),
    fromAddress: 'a@x.test', toAddresses: ['b@x.test'], ccAddresses: [], subject,
    text: 'body', html: null, headers: {}, attachments: [],
  });
  await insertSinkMessage(ctx.sql, message('other project', other.projectId), { messages: 5, bytes: 1e9 });
  const ids = await Promise.all(Array.from({ length: 60 }, (_, i) => insertSinkMessage(ctx.sql, message(`m${i}`, t.projectId), { messages: 5, bytes: 1e9 })));
  const kept = await ctx.sql`select id from sink_messages where project_id = ${t.projectId} order by id`;
  assert.deepEqual(kept.map((r) => r.id), [...ids].sort().slice(-5));
  const [{ n }] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from sink_messages where project_id = ${other.projectId}`;
  assert.equal(n, 1);
});

test('the sink keeps only the newest mail that fits in its byte budget', async () => {
  const t = await ctx.tenant();
  const sized = (subject: string, bytes: number) => ({
    projectId: t.projectId, emailId: null, raw: Buffer.alloc(bytes, 'x'),
    fromAddress: 'a@x.test', toAddresses: ['b@x.test'], ccAddresses: [], subject,
    text: 'body', html: null, headers: {}, attachments: [],
  });
  const keep = { messages: 100, bytes: 10_000 };
  const ids = [];
  for (let i = 0; i < 6; i++) ids.push(await insertSinkMessage(ctx.sql, sized(`m${i}`, 3_000), keep));
  const kept = await ctx.sql<{ id: string; sizeBytes: number }[]>`
    select id, size_bytes from sink_messages where project_id = ${t.projectId} order by id`;
  assert.deepEqual(kept.map((r) => r.id), ids.slice(-3), 'three of 3000 bytes fit in 10000');
  // One message larger than the whole budget still stays, alone: the newest is always kept.
  const big = await insertSinkMessage(ctx.sql, sized('big', 20_000), keep);
  assert.deepEqual((await ctx.sql`select id from sink_messages where project_id = ${t.projectId}`).map((r) => r.id), [big]);
});

test('messages caught together share one insert and one prune, and are stored field for field', async () => {
  const t = await ctx.tenant();
  const before = sinkStatementCounts(ctx.sql);
  const message = (i: number) => ({
    projectId: t.projectId, emailId: null, raw: Buffer.from(`Subject: m${i}\r\n\r\nbody ${i}`),
    fromAddress: 'a@x.test', toAddresses: ['b@x.test', `c${i}@x.test`], ccAddresses: [], subject: `m${i}`,
    text: `body ${i}`, html: null, headers: { Subject: `m${i}`, 'X-Index': String(i) },
    attachments: [{ filename: 'a.txt', content_type: 'text/plain', size_bytes: i }],
  });
  const ids = await Promise.all(Array.from({ length: 20 }, (_, i) => insertSinkMessage(ctx.sql, message(i), { messages: 100, bytes: 1e9 })));
  const after = sinkStatementCounts(ctx.sql);
  assert.ok(after.inserts - before.inserts < 20, `20 messages took ${after.inserts - before.inserts} inserts`);
  assert.ok(after.prunes - before.prunes < 20, `20 messages took ${after.prunes - before.prunes} prunes`);
  const rows = await ctx.sql<{ id: string; toAddresses: string[]; headers: unknown; attachments: unknown; raw: Buffer; sizeBytes: number }[]>`
    select id, to_addresses, headers, attachments, raw, size_bytes from sink_messages where project_id = ${t.projectId} order by id`;
  assert.deepEqual(rows.map((r) => r.id), [...ids].sort());
  for (const row of rows) {
    const i = ids.indexOf(row.id);
    assert.deepEqual(row.toAddresses, ['b@x.test', `c${i}@x.test`]);
    assert.deepEqual(row.headers, { Subject: `m${i}`, 'X-Index': String(i) });
    assert.deepEqual(row.attachments, [{ filename: 'a.txt', content_type: 'text/plain', size_bytes: i }]);
    assert.equal(row.raw.toString(), `Subject: m${i}\r\n\r\nbody ${i}`);
    assert.equal(row.sizeBytes, row.raw.length);
  }
});

test('one message PostgreSQL refuses fails alone; the others caught with it are stored', async () => {
  const t = await ctx.tenant();
  const message = (subject: string) => ({
    projectId: t.projectId, emailId: null, raw: Buffer.from('x'),
    fromAddress: 'a@x.test', toAddresses: ['b@x.test'], ccAddresses: [], subject,
    text: null, html: null, headers: {}, attachments: [],
  });
  const results = await Promise.allSettled(['ok 1', 'bad \u0000 subject', 'ok 2', 'ok 3'].map((s) => insertSinkMessage(ctx.sql, message(s), { messages: 100, bytes: 1e9 })));
  assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
  const stored = await ctx.sql<{ subject: string }[]>`select subject from sink_messages where project_id = ${t.projectId} order by id`;
  assert.deepEqual(stored.map((r) => r.subject), ['ok 1', 'ok 2', 'ok 3']);
});

test('a prune reads a handful of pages, however many messages the project keeps or dropped before', async () => {
  const t = await ctx.tenant();
  const keep = { messages: 1000, bytes: 1e9 };
  // Rows dropped by earlier prunes stay in the table's index until a vacuum, which this test keeps
  // away: a prune that walked them all from the first would read a page for every few.
  await ctx.sql`alter table sink_messages set (autovacuum_enabled = off)`;
  const message = (i: number) => ({
    projectId: t.projectId, emailId: null, raw: Buffer.alloc(1000, 'x'),
    fromAddress: 'a@x.test', toAddresses: ['b@x.test'], ccAddresses: [], subject: `m${i}`,
    text: null, html: null, headers: {}, attachments: [],
  });
  for (let start = 0; start < 2001; start += 100) {
    await Promise.all(Array.from({ length: Math.min(100, 2001 - start) }, (_, i) => insertSinkMessage(ctx.sql, message(start + i), keep)));
  }
  await ctx.sql`alter table sink_messages reset (autovacuum_enabled)`;
  const [{ n }] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from sink_messages where project_id = ${t.projectId}`;
  assert.equal(n, 1000);
  // The next message's prune, measured and rolled back: it drops one message and reads only
  // the tally and the index entries around the cut, not the thousand rows kept.
  let pages = 0;
  const rollback = new Error('rollback');
  await ctx.sql.begin(async (tx) => {
    // A prune that drops one first, so this connection has the function and its statements
    // compiled, as the store's connections do after their first batches: the count below is the
    // prune's own pages.
    await tx`update sink_tallies set messages = messages + 1, bytes = bytes + 1000 where project_id = ${t.projectId}`;
    await tx`select sink_prune(${t.projectId}, ${keep.messages}, ${keep.bytes})`;
    await tx`update sink_tallies set messages = messages + 1, bytes = bytes + 1000 where project_id = ${t.projectId}`;
    // A prepared call, as the store makes it: the function still plans the prune for these values.
    const [row] = await tx.unsafe('explain (analyze, buffers, format json) select sink_prune($1, $2, $3)', [t.projectId, keep.messages, keep.bytes]);
    const { Plan: plan } = (row as unknown as { 'QUERY PLAN': [{ Plan: Record<string, number> }] })['QUERY PLAN'][0];
    pages = plan['Shared Hit Blocks']! + plan['Shared Read Blocks']!;
    const [{ left }] = await tx<[{ left: number }]>`select count(*)::int as left from sink_messages where project_id = ${t.projectId}`;
    assert.equal(left, 998, 'the tally moved on by one twice, so the two oldest went');
    throw rollback;
  }).catch((err) => { if (err !== rollback) throw err; });
  assert.ok(pages < 30, `the prune read ${pages} pages`);
});

test('a sink emptied through the API counts afresh from its next message', async () => {
  const t = await ctx.tenant();
  const message = (subject: string) => ({
    projectId: t.projectId, emailId: null, raw: Buffer.from(subject),
    fromAddress: 'a@x.test', toAddresses: ['b@x.test'], ccAddresses: [], subject,
    text: null, html: null, headers: {}, attachments: [],
  });
  const keep = { messages: 2, bytes: 1e9 };
  for (const s of ['a', 'b', 'c']) await insertSinkMessage(ctx.sql, message(s), keep);
  await ctx.sql`delete from sink_messages where project_id = ${t.projectId}`;
  const first = await insertSinkMessage(ctx.sql, message('d'), keep);
  assert.deepEqual((await ctx.sql`select id from sink_messages where project_id = ${t.projectId}`).map((r) => r.id), [first]);
  const ids = [first];
  for (const s of ['e', 'f']) ids.push(await insertSinkMessage(ctx.sql, message(s), keep));
  const kept = await ctx.sql<{ subject: string }[]>`select subject from sink_messages where project_id = ${t.projectId} order by id`;
  assert.deepEqual(kept.map((r) => r.subject), ['e', 'f']);
});

test('a prune that fails after its insert committed leaves the messages stored once and reports the error', async () => {
  const t = await ctx.tenant();
  const [{ definition }] = await ctx.sql<[{ definition: string }]>`
    select pg_get_functiondef('sink_prune(text, bigint, bigint)'::regprocedure) as definition`;
  await ctx.sql`create or replace function sink_prune(project text, keep_messages bigint, keep_bytes bigint) returns void
                language plpgsql as $$ begin raise exception 'prune broken'; end $$`;
  try {
    const message = (subject: string) => ({
      projectId: t.projectId, emailId: null, raw: Buffer.from(subject),
      fromAddress: 'a@x.test', toAddresses: ['b@x.test'], ccAddresses: [], subject,
      text: null, html: null, headers: {}, attachments: [],
    });
    const errors: unknown[] = [];
    const ids = await Promise.all(['a', 'b', 'c'].map((s) => insertSinkMessage(ctx.sql, message(s), { messages: 1, bytes: 1e9 }, (err) => errors.push(err))));
    assert.equal(errors.length, 3);
    assert.match(String((errors[0] as Error).message), /prune broken/);
    const stored = await ctx.sql<{ id: string }[]>`select id from sink_messages where project_id = ${t.projectId} order by id`;
    assert.deepEqual(stored.map((r) => r.id), [...ids].sort(), 'each message stored once, none pruned');
  } finally {
    await ctx.sql.unsafe(definition);
  }
  // The next message's prune catches up on what the failed ones left.
  const last = await insertSinkMessage(ctx.sql, {
    projectId: t.projectId, emailId: null, raw: Buffer.from('d'), fromAddress: 'a@x.test', toAddresses: ['b@x.test'],
    ccAddresses: [], subject: 'd', text: null, html: null, headers: {}, attachments: [],
  }, { messages: 1, bytes: 1e9 });
  assert.deepEqual((await ctx.sql`select id from sink_messages where project_id = ${t.projectId}`).map((r) => r.id), [last]);
});
