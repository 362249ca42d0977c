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
  await insertSinkMessage(ctx.sql, message('other project', other.projectId), 5);
  const ids = await Promise.all(Array.from({ length: 60 }, (_, i) => insertSinkMessage(ctx.sql, message(`m${i}`, t.projectId), 5)));
  const kept = await ctx.sql`select id from sink_messages where project_id = ${t.projectId} order by id`;
  assert.deepEqual(kept.map((r) => r.id), [...ids].sort().slice(-5));
  const [{ n }] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from sink_messages where project_id = ${other.projectId}`;
  assert.equal(n, 1);
});
