import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';

const ctx = await createTestContext();
const { key } = await ctx.tenant();
const other = await ctx.tenant('other');
await startTestWorker(ctx.config, ctx.sql);

const inMs = (ms: number) => new Date(Date.now() + ms).toISOString();
const send = async (scheduledAt: string | undefined, k = key) => {
  const res = await ctx.call(k, '/v1/emails', { method: 'POST', body: { from: 'app@acme.test', to: 'ann@example.net', subject: 'Later', text: 'hi', scheduled_at: scheduledAt } });
  return { res, body: (await res.json()) as { id: string; status: string } };
};
const get = async (id: string) => (await (await ctx.call(key, `/v1/emails/${id}`)).json()) as { status: string; scheduled_at: string | null; sent_at: string | null };
const caught = async (id: string) => (await ctx.sql<{ n: number }[]>`select count(*)::int as n from sink_messages where email_id = ${id}`)[0]!.n;

test('a scheduled email waits as scheduled, then is sent within 5 s of its time', async () => {
  const at = inMs(2500);
  const { res, body } = await send(at);
  assert.equal(res.status, 201);
  assert.equal(body.status, 'scheduled');
  const before = await get(body.id);
  assert.equal(before.status, 'scheduled');
  assert.equal(before.scheduled_at, at);
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal((await get(body.id)).status, 'scheduled', 'not sent early');
  await waitFor('the scheduled send', async () => (await get(body.id)).status === 'sent', 10_000);
  const sentAt = Date.parse((await get(body.id)).sent_at!);
  assert.ok(sentAt >= Date.parse(at) - 1000 && sentAt <= Date.parse(at) + 5000, `sent ${sentAt - Date.parse(at)} ms from its time`);
  assert.equal(await caught(body.id), 1);
});

test('a time in the past or now sends at once, as queued', async () => {
  const { res, body } = await send(inMs(-60_000));
  assert.equal(res.status, 201);
  assert.equal(body.status, 'queued');
  await waitFor('the immediate send', async () => (await get(body.id)).status === 'sent');
});

test('bad scheduled_at values are 422 naming the field', async () => {
  for (const value of ['2026-05-04T09:00:00', 'tomorrow', '2026-13-40T99:00:00Z', inMs(31 * 86_400_000), 42]) {
    const res = await ctx.call(key, '/v1/emails', { method: 'POST', body: { from: 'app@acme.test', to: 'ann@example.net', subject: 'x', text: 'x', scheduled_at: value } });
    assert.equal(res.status, 422, String(value));
    const { detail } = (await res.json()) as { detail: { loc: unknown[] }[] };
    assert.deepEqual(detail[0]!.loc, ['body', 'scheduled_at'], String(value));
  }
});

test('PATCH moves a scheduled email, cancel stops it; both 409 once it is no longer scheduled', async () => {
  const { body } = await send(inMs(60_000));
  const moved = await ctx.call(key, `/v1/emails/${body.id}`, { method: 'PATCH', body: { scheduled_at: inMs(120_000) } });
  assert.equal(moved.status, 200);
  const view = (await moved.json()) as { status: string; scheduled_at: string };
  assert.equal(view.status, 'scheduled');
  const [job] = await ctx.sql<[{ delay: number; n: number }]>`
    select extract(epoch from max(run_at) - now())::float8 as delay, count(*)::int as n from graphile_worker.jobs where key = ${body.id}`;
  assert.equal(job.n, 1, 'the job was replaced, not doubled');
  assert.ok(job.delay > 100 && job.delay <= 120, `due in ${job.delay} s`);

  assert.equal((await ctx.call(other.key, `/v1/emails/${body.id}/cancel`, { method: 'POST' })).status, 404, 'another project');
  const canceled = await ctx.call(key, `/v1/emails/${body.id}/cancel`, { method: 'POST' });
  assert.equal(canceled.status, 200);
  assert.equal(((await canceled.json()) as { status: string }).status, 'canceled');
  assert.equal((await ctx.sql`select 1 from graphile_worker.jobs where key = ${body.id}`).length, 0, 'its job is gone');
  for (const [method, path, payload] of [['PATCH', `/v1/emails/${body.id}`, { scheduled_at: inMs(5000) }], ['POST', `/v1/emails/${body.id}/cancel`, undefined]] as const) {
    const res = await ctx.call(key, path, { method, body: payload });
    assert.equal(res.status, 409, `${method} after cancel`);
    assert.equal(((await res.json()) as { error: { type: string } }).error.type, 'email_not_scheduled');
  }
  const filtered = (await (await ctx.call(key, '/v1/emails?status=canceled')).json()) as { data: { id: string }[] };
  assert.ok(filtered.data.some((e) => e.id === body.id), 'the status filter takes canceled');
  const bad = await ctx.call(key, `/v1/emails/${body.id}`, { method: 'PATCH', body: { scheduled_at: 'soon' } });
  assert.equal(bad.status, 422);
});

test('racing PATCH, cancel and the due time never sends twice, never after a cancel, never at the old time', async () => {
  const emails = [];
  for (let i = 0; i < 12; i++) emails.push((await send(inMs(1200))).body.id);
  await new Promise((r) => setTimeout(r, 1150));
  // Right at the due time, half are pushed an hour out and half canceled, all at once.
  const answers = await Promise.all(emails.map((id, i) => (i % 2
    ? ctx.call(key, `/v1/emails/${id}`, { method: 'PATCH', body: { scheduled_at: inMs(3_600_000) } })
    : ctx.call(key, `/v1/emails/${id}/cancel`, { method: 'POST' }))));
  await new Promise((r) => setTimeout(r, 4000));
  for (const [i, id] of emails.entries()) {
    const state = await get(id);
    const n = await caught(id);
    assert.ok(n <= 1, 'never sent twice');
    if (answers[i]!.status === 200) {
      assert.equal(state.status, i % 2 ? 'scheduled' : 'canceled', `${id} after a successful change`);
      assert.equal(n, 0, 'a change that won means no send at the old time');
    } else {
      assert.equal(answers[i]!.status, 409, 'the due time won');
      assert.equal(state.status, 'sent');
      assert.equal(n, 1);
    }
  }
});
