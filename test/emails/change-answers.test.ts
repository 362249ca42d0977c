import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { createApiKey } from '../../src/keys/service.ts';

// §16.4: a sending key may move and cancel what it sent, and reads nothing of it.
const ctx = await createTestContext();
const { projectId, key: full } = await ctx.tenant();
const sending = (await createApiKey(ctx.sql, projectId, 'sender', 'sending')).key;
const other = await ctx.tenant('other');

const inMs = (ms: number) => new Date(Date.now() + ms).toISOString();
const schedule = async (k: string, at = inMs(3_600_000)) => {
  const res = await ctx.call(k, '/v1/emails', { method: 'POST', body: { from: 'app@acme.test', to: 'ann@example.net', bcc: 'hidden@example.net', subject: 'Secret subject', text: 'secret body', scheduled_at: at } });
  assert.equal(res.status, 201);
  return { id: ((await res.json()) as { id: string }).id, at };
};

test('/v1: a sending key\'s PATCH (same or new time) and cancel answer {id, status, scheduled_at} only', async () => {
  const { id, at } = await schedule(sending);
  for (const when of [at, inMs(7_200_000)]) {
    const res = await ctx.call(sending, `/v1/emails/${id}`, { method: 'PATCH', body: { scheduled_at: when } });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { id, status: 'scheduled', scheduled_at: when });
  }
  const res = await ctx.call(sending, `/v1/emails/${id}/cancel`, { method: 'POST' });
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { id, status: 'canceled', scheduled_at: null });
});

test('/v1: a full key still gets the whole email back', async () => {
  const { id, at } = await schedule(full);
  const res = await ctx.call(full, `/v1/emails/${id}`, { method: 'PATCH', body: { scheduled_at: at } });
  const body = await res.json() as Record<string, unknown>;
  assert.equal(body.subject, 'Secret subject');
  assert.deepEqual(body.to, ['ann@example.net']);
});

test('another project\'s email: a sending key gets the same 404 as a full key, on /v1 and /resend', async () => {
  const { id, at } = await schedule(other.key);
  const answers = async (k: string) => Promise.all([
    ctx.call(k, `/v1/emails/${id}`, { method: 'PATCH', body: { scheduled_at: at } }),
    ctx.call(k, `/v1/emails/${id}/cancel`, { method: 'POST' }),
    ctx.call(k, `/resend/emails/${id}`, { method: 'PATCH', body: { scheduled_at: at } }),
    ctx.call(k, `/resend/emails/${id}/cancel`, { method: 'POST' }),
  ].map((p) => p.then(async (r) => [r.status, await r.json()])));
  const bySending = await answers(sending);
  assert.deepEqual(bySending, await answers(full));
  assert.ok(bySending.every(([status]) => status === 404));
  // Untouched.
  const [row] = await ctx.sql`select status from emails where id = ${id}`;
  assert.equal(row!.status, 'scheduled');
});

test('/resend: a sending key\'s PATCH and cancel answer {object, id} only', async () => {
  const { id, at } = await schedule(sending);
  let res = await ctx.call(sending, `/resend/emails/${id}`, { method: 'PATCH', body: { scheduled_at: at } });
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { object: 'email', id });
  res = await ctx.call(sending, `/resend/emails/${id}/cancel`, { method: 'POST' });
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { object: 'email', id });
});
