import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applyRetention } from '../../src/retention/apply.ts';
import { newId } from '../../src/platform/ids.ts';
import { createTestContext } from '../helpers/app.ts';
import { replyMessage } from './fixtures.ts';

const ctx = await createTestContext();
const { sql } = ctx;

async function receive(key: string, subject: string) {
  const res = await ctx.app.request('/v1/sink/inbound', {
    method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'message/rfc822' }, body: new Uint8Array(replyMessage({ to: 'a@acme.test', subject }).raw),
  });
  assert.equal(res.status, 201);
  return ((await res.json()) as { id: string }).id;
}

test('received emails follow RETENTION_DAYS (with their events and deliveries) and BODY_RETENTION_DAYS', async () => {
  const t = await ctx.tenant();
  await sql`insert into webhook_endpoints (id, project_id, url, secret_encrypted) values (${newId('webhook')}, ${t.projectId}, 'https://hooks.example.test/h', ${Buffer.from('x')})`;
  const old = await receive(t.key, 'old');
  const middle = await receive(t.key, 'middle');
  const fresh = await receive(t.key, 'fresh');
  await sql`update received_emails set created_at = now() - interval '100 days' where id = ${old}`;
  await sql`update received_emails set created_at = now() - interval '40 days' where id = ${middle}`;
  // Its email.received was delivered (a pending one keeps it: the next test).
  await sql`update webhook_deliveries set status = 'delivered' where project_id = ${t.projectId} and email_id = ${old}`;

  await applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 30 });

  assert.equal((await ctx.call(t.key, `/v1/emails/receiving/${old}`)).status, 404);
  const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from events where project_id = ${t.projectId} and email_id = ${old}`;
  assert.equal(n, 0);
  const [{ d }] = await sql<[{ d: number }]>`select count(*)::int as d from webhook_deliveries where project_id = ${t.projectId} and email_id = ${old}`;
  assert.equal(d, 0);

  const purged = await (await ctx.call(t.key, `/v1/emails/receiving/${middle}`)).json() as Record<string, any>;
  assert.equal(purged.subject, 'middle');
  assert.equal(purged.text, null);
  assert.equal(purged.html, null);
  assert.equal(purged.raw, null, 'no raw once the body is purged');
  const kept = await (await ctx.call(t.key, `/v1/emails/receiving/${fresh}`)).json() as Record<string, any>;
  assert.match(kept.text, /^Yes, please ship it/);
  assert.ok(kept.raw.download_url);
});

test('a received email whose email.received delivery is still pending is not removed until it is delivered or fails', async () => {
  const t = await ctx.tenant();
  await sql`insert into webhook_endpoints (id, project_id, url, secret_encrypted) values (${newId('webhook')}, ${t.projectId}, 'https://hooks.example.test/p', ${Buffer.from('x')})`;
  const waiting = await receive(t.key, 'waiting');
  const [{ pending }] = await sql<[{ pending: number }]>`
    select count(*)::int as pending from webhook_deliveries where project_id = ${t.projectId} and email_id = ${waiting} and status = 'pending'`;
  assert.equal(pending, 1);
  await sql`update received_emails set created_at = now() - interval '100 days' where id = ${waiting}`;

  await applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 30 });
  assert.equal((await ctx.call(t.key, `/v1/emails/receiving/${waiting}`)).status, 200, 'kept while its delivery is pending');
  const [{ d }] = await sql<[{ d: number }]>`select count(*)::int as d from webhook_deliveries where project_id = ${t.projectId} and email_id = ${waiting} and status = 'pending'`;
  assert.equal(d, 1, 'the pending delivery is still there to be sent');

  await sql`update webhook_deliveries set status = 'failed' where project_id = ${t.projectId} and email_id = ${waiting}`;
  await applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 30 });
  assert.equal((await ctx.call(t.key, `/v1/emails/receiving/${waiting}`)).status, 404, 'removed once nothing is pending');
});
