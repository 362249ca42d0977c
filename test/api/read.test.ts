import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { newId } from '../../src/platform/ids.ts';
import type { Sql } from '../../src/platform/db.ts';

const ctx = await createTestContext();
const A = await ctx.tenant('read-a');
const B = await ctx.tenant('read-b');

async function insertEmail(sql: Sql, projectId: string, status = 'queued', extra: { bcc?: string[] } = {}) {
  const id = newId('email');
  await sql`
    insert into emails (id, project_id, status, from_address, to_addresses, bcc_addresses, subject, text, headers)
    values (${id}, ${projectId}, ${status}, 'Acme <hi@acme.test>', ${['a@x.test']}, ${extra.bcc ?? []}, 'Hello', 'Hi', ${sql.json({ 'X-Tag': 'one' })})`;
  return id;
}

const aIds: string[] = [];
for (let i = 0; i < 7; i++) aIds.push(await insertEmail(ctx.sql, A.projectId, i % 2 ? 'sent' : 'queued', { bcc: ['secret@x.test'] }));
const bId = await insertEmail(ctx.sql, B.projectId);

test('GET /v1/emails lists newest first with the default limit', async () => {
  const res = await ctx.call(A.key, '/v1/emails');
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.deepEqual(body.data.map((e: { id: string }) => e.id), [...aIds].reverse());
  assert.equal(body.has_more, false);
  const e = body.data[0];
  assert.equal(e.from, 'Acme <hi@acme.test>');
  assert.deepEqual(e.to, ['a@x.test']);
  assert.deepEqual(e.cc, []);
  assert.deepEqual(e.reply_to, []);
  assert.deepEqual(e.headers, { 'X-Tag': 'one' });
  assert.ok(!('html' in e) && !('text' in e), 'list items carry no bodies');
  assert.equal(e.delivered_at, null);
  assert.ok(!('bcc' in e) && !JSON.stringify(body).includes('secret@x.test'), 'bcc never returned');
});

test('cursor paging walks every email exactly once', async () => {
  const seen: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 10; page++) {
    const res = await ctx.call(A.key, `/v1/emails?limit=3${cursor ? `&starting_after=${cursor}` : ''}`);
    const body = await res.json();
    seen.push(...body.data.map((e: { id: string }) => e.id));
    if (!body.has_more) break;
    cursor = body.data.at(-1).id;
  }
  assert.deepEqual(seen, [...aIds].reverse());
  const exact = await (await ctx.call(A.key, '/v1/emails?limit=7')).json();
  assert.equal(exact.has_more, false, 'has_more is false when the page is exactly the rest');
  const last = await (await ctx.call(A.key, `/v1/emails?starting_after=${aIds[0]}`)).json();
  assert.deepEqual(last, { data: [], has_more: false });
});

test('status filter', async () => {
  const body = await (await ctx.call(A.key, '/v1/emails?status=sent&limit=100')).json();
  assert.equal(body.data.length, 3);
  assert.ok(body.data.every((e: { status: string }) => e.status === 'sent'));
});

test('paging and filter validation answer 422 in the spec shape', async () => {
  for (const [query, loc, type] of [
    ['limit=0', ['query', 'limit'], 'greater_than_equal'],
    ['limit=101', ['query', 'limit'], 'less_than_equal'],
    ['limit=abc', ['query', 'limit'], 'number_type'],
    ['status=delivered', ['query', 'status'], 'enum'],
  ] as const) {
    const res = await ctx.call(A.key, `/v1/emails?${query}`);
    assert.equal(res.status, 422, query);
    const body = await res.json();
    assert.deepEqual(body.detail[0].loc, loc, query);
    assert.equal(body.detail[0].type, type, query);
    assert.equal(typeof body.detail[0].msg, 'string');
  }
});

test('a foreign or unknown cursor is 404, not an empty page', async () => {
  for (const cursor of [bId, 'email_nope']) {
    const res = await ctx.call(A.key, `/v1/emails?starting_after=${cursor}`);
    assert.equal(res.status, 404);
    assert.equal((await res.json()).error.type, 'not_found');
  }
});

test('GET /v1/emails/{id}: own 200, foreign and unknown 404 (never 403)', async () => {
  const own = await ctx.call(A.key, `/v1/emails/${aIds[0]}`);
  assert.equal(own.status, 200);
  const body = await own.json();
  assert.equal(body.id, aIds[0]);
  assert.equal(body.text, 'Hi', 'one email is read with its bodies');
  assert.equal(body.html, null);
  for (const id of [bId, 'email_01ARZ3NDEKTSV4RRFFQ69G5FAV']) {
    const res = await ctx.call(A.key, `/v1/emails/${id}`);
    assert.equal(res.status, 404);
    assert.deepEqual(await res.json(), { error: { type: 'not_found', message: 'Email not found.' } });
  }
});

test('every list route is scoped to the key\'s project', async () => {
  await ctx.sql`insert into domains (id, project_id, value, region, dkim_tokens) values
    (${newId('domain')}, ${A.projectId}, 'a.test', 'us-east-1', ${['t1', 't2', 't3']}),
    (${newId('domain')}, ${B.projectId}, 'b.test', 'eu-west-1', ${[]})`;
  const whA = newId('webhook');
  const whB = newId('webhook');
  await ctx.sql`insert into webhook_endpoints (id, project_id, url, secret_encrypted) values
    (${whA}, ${A.projectId}, 'https://a.test/hook', ${Buffer.from('x')}),
    (${whB}, ${B.projectId}, 'https://b.test/hook', ${Buffer.from('x')})`;

  const domains = await (await ctx.call(A.key, '/v1/domains')).json();
  assert.deepEqual(domains.data.map((d: { value: string }) => d.value), ['a.test']);
  assert.equal(domains.data[0].dns_records.length, 3);
  assert.deepEqual(domains.data[0].dns_records[0], { record_type: 'CNAME', name: 't1._domainkey.a.test', value: 't1.dkim.amazonses.com' });

  const hooks = await (await ctx.call(A.key, '/v1/webhooks')).json();
  assert.deepEqual(hooks.data.map((h: { id: string }) => h.id), [whA]);
  assert.deepEqual(Object.keys(hooks.data[0]).sort(), ['consecutive_failures', 'created_at', 'event_types', 'id', 'status', 'url']);

  const keys = await (await ctx.call(B.key, '/v1/api-keys')).json();
  assert.deepEqual(keys.data.map((k: { id: string }) => k.id), [B.keyId]);

  assert.equal((await ctx.call(A.key, `/v1/webhooks/${whA}/deliveries`)).status, 200);
  const foreign = await ctx.call(A.key, `/v1/webhooks/${whB}/deliveries`);
  assert.equal(foreign.status, 404);
  assert.equal((await foreign.json()).error.type, 'not_found');
});

test('deliveries list: newest first, pending included, capped at 100', async () => {
  const wh = newId('webhook');
  await ctx.sql`insert into webhook_endpoints (id, project_id, url, secret_encrypted) values (${wh}, ${A.projectId}, 'https://a.test/x', ${Buffer.from('x')})`;
  const emailId = aIds[0]!;
  const deliveryIds: string[] = [];
  for (let i = 0; i < 105; i++) {
    const evt = newId('event');
    await ctx.sql`insert into events (id, project_id, email_id, type) values (${evt}, ${A.projectId}, ${emailId}, 'email.sent')`;
    const id = newId('delivery');
    deliveryIds.push(id);
    await ctx.sql`insert into webhook_deliveries (id, project_id, endpoint_id, event_id, email_id, status)
      values (${id}, ${A.projectId}, ${wh}, ${evt}, ${emailId}, ${i === 104 ? 'pending' : 'delivered'})`;
  }
  const body = await (await ctx.call(A.key, `/v1/webhooks/${wh}/deliveries`)).json();
  assert.equal(body.data.length, 100);
  assert.equal(body.data[0].id, deliveryIds.at(-1));
  assert.equal(body.data[0].status, 'pending');
  assert.ok(body.data[0].next_attempt_at);
  assert.equal(body.data[1].next_attempt_at, null, 'settled deliveries have no next attempt');
});
