import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { insertSinkMessage } from '../../src/sink/store.ts';

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
