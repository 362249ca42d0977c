import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';

const ctx = await createTestContext({ env: { EMAIL_MAX_MESSAGE_BYTES: '8192' } });
const { key, projectId } = await ctx.tenant();

const item = (i: number, extra: Record<string, unknown> = {}) => ({ from: 'app@acme.test', to: `r${i}@example.net`, subject: `n${i}`, text: 'hi', ...extra });
const batch = (body: unknown, headers: Record<string, string> = {}) => ctx.call(key, '/v1/emails/batch', { method: 'POST', body, headers });
const count = async () => (await ctx.sql<[{ n: number }]>`select count(*)::int as n from emails where project_id = ${projectId}`)[0].n;

test('a batch answers every id in request order, written with its jobs in one transaction', async () => {
  const res = await batch([item(0), item(1), item(2, { scheduled_at: new Date(Date.now() + 3_600_000).toISOString() })]);
  assert.equal(res.status, 201);
  const { data } = (await res.json()) as { data: { id: string; status: string }[] };
  assert.deepEqual(data.map((d) => d.status), ['queued', 'queued', 'scheduled']);
  const rows = await ctx.sql<{ id: string; subject: string; txid: string }[]>`select id, subject, xmin::text as txid from emails where id = any(${data.map((d) => d.id)})`;
  assert.deepEqual(data.map((d) => rows.find((r) => r.id === d.id)?.subject), ['n0', 'n1', 'n2'], 'request order');
  assert.equal(new Set(rows.map((r) => r.txid)).size, 1, 'one transaction');
  const jobs = await ctx.sql`select key from graphile_worker.jobs where key = any(${data.map((d) => d.id)})`;
  assert.equal(jobs.length, 3);
});

test('validation is all or nothing, with loc starting ["body", i]', async () => {
  const before = await count();
  const res = await batch([item(0), item(1, { to: 'not an address' }), item(2, { html: null, text: null }), item(3, { text: 'x'.repeat(9000) })]);
  assert.equal(res.status, 422);
  const { detail } = (await res.json()) as { detail: { loc: (string | number)[]; type: string }[] };
  assert.deepEqual(detail.map((d) => d.loc.slice(0, 2)), [['body', 1], ['body', 2], ['body', 3]]);
  assert.deepEqual(detail[0]!.loc.slice(0, 3), ['body', 1, 'to']);
  assert.equal(detail[1]!.type, 'missing_content');
  assert.equal(detail[2]!.type, 'message_too_large');
  assert.equal(await count(), before, 'nothing recorded');
  for (const body of [[], Array.from({ length: 101 }, (_, i) => item(i)), { not: 'an array' }]) {
    const r = await batch(body);
    assert.equal(r.status, 422);
    assert.deepEqual(((await r.json()) as { detail: { loc: unknown[] }[] }).detail[0]!.loc, ['body']);
  }
  assert.equal(await count(), before);
});

test('an Idempotency-Key covers the whole batch', async () => {
  const body = [item(10), item(11)];
  const first = await batch(body, { 'idempotency-key': 'batch-1' });
  assert.equal(first.status, 201);
  const ids = ((await first.json()) as { data: { id: string }[] }).data.map((d) => d.id);
  const again = await batch(body, { 'idempotency-key': 'batch-1' });
  assert.equal(again.status, 201);
  assert.equal(again.headers.get('idempotent-replayed'), 'true');
  assert.deepEqual(((await again.json()) as { data: { id: string }[] }).data.map((d) => d.id), ids);
  const changed = await batch([item(10)], { 'idempotency-key': 'batch-1' });
  assert.equal(changed.status, 409);
  const single = await ctx.call(key, '/v1/emails', { method: 'POST', body: item(10), headers: { 'idempotency-key': 'batch-1' } });
  assert.equal(single.status, 409, 'a single send cannot replay a batch key');
});
