import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';
import { seedSegment } from '../broadcasts/fixtures.ts';
import { applyRetention } from '../../src/retention/apply.ts';

// RETENTION_DAYS over broadcasts: a finished broadcast's counts are kept on its row before its
// emails go, and its recipients' rows (addresses) go; the broadcast itself stays.

const ctx = await createTestContext({ env: { PUBLIC_BASE_URL: 'https://mail.example.test' } });
const worker = await startTestWorker(ctx.config, ctx.sql);
const DEFAULTS = { retentionDays: 90, bodyRetentionDays: 30 };

type Shown = { status: string; counts: Record<string, number> };
const get = async (key: string, id: string) => (await (await ctx.call(key, `/v1/broadcasts/${id}`)).json()) as Shown;
const recipients = async (key: string, id: string, type = 'sent') =>
  ((await (await ctx.call(key, `/v1/broadcasts/${id}/recipients?type=${type}`)).json()) as { data: { email: string }[] }).data.map((r) => r.email);
const rowsOf = async (id: string) => (await ctx.sql<[{ n: number }]>`select count(*)::int as n from broadcast_recipients where broadcast_id = ${id}`)[0].n;

async function startBroadcast(key: string, segmentId: string) {
  const made = await ctx.call(key, '/v1/broadcasts', { method: 'POST', body: { name: 'n', segment_id: segmentId, from: 'a@example.test', subject: 's', html: '<p>x</p>' } });
  const { id } = (await made.json()) as { id: string };
  assert.equal((await ctx.call(key, `/v1/broadcasts/${id}/send`, { method: 'POST', body: {} })).status, 200);
  return id;
}

async function sendBroadcast(key: string, segmentId: string) {
  const id = await startBroadcast(key, segmentId);
  await waitFor('the broadcast to be sent', async () => (await get(key, id)).status === 'sent', 60_000, 100);
  await waitFor('every copy sent', async () => (await get(key, id)).counts.sent === 4, 60_000, 100);
  return id;
}

test('a finished broadcast past RETENTION_DAYS keeps its counts and loses its recipient rows; a recent or unfinished one keeps both', { timeout: 120_000 }, async () => {
  const { projectId, key } = await ctx.tenant('bc-retention');
  const { segmentId, contactIds } = await seedSegment(ctx.sql, projectId, 5);
  await ctx.sql`update contacts set unsubscribed = true where id = ${contactIds[4]!}`;
  const old = await sendBroadcast(key, segmentId);
  const recent = await sendBroadcast(key, segmentId);
  await worker.stop();
  // One recipient of the old one left afterwards: counted as unsubscribed, and kept so.
  await ctx.sql`update contacts set unsubscribed = true where id = ${contactIds[0]!}`;
  const before = await get(key, old);
  assert.deepEqual([before.counts.recipients, before.counts.sent, before.counts.unsubscribed], [4, 4, 1]);
  assert.equal((await recipients(key, old)).length, 4);

  // The old one began 90 days ago: its first emails go with the next day removed. An unfinished one older still is left alone.
  await ctx.sql`update broadcasts set snapshot_at = now() - interval '90 days' where id = ${old}`;
  // The worker is stopped: this one stays sending.
  const sending = { id: await startBroadcast(key, segmentId) };
  assert.equal((await get(key, sending.id)).status, 'sending');
  await ctx.sql`update broadcasts set snapshot_at = now() - interval '120 days' where id = ${sending.id}`;
  await ctx.sql`insert into broadcast_recipients (broadcast_id, contact_id, project_id, email)
    values (${sending.id}, ${contactIds[1]!}, ${projectId}, 'c2@example.test')`;

  await applyRetention(ctx.sql, DEFAULTS);
  assert.equal(await rowsOf(old), 0, 'the old broadcast\'s recipient rows are gone');
  assert.equal(await rowsOf(recent), 4, 'a recent broadcast keeps its rows');
  assert.equal(await rowsOf(sending.id), 1, 'an unfinished broadcast keeps its rows');
  const [kept] = await ctx.sql<[{ countsKept: Record<string, number> | null }]>`select counts_kept from broadcasts where id = ${old}`;
  assert.deepEqual(kept.countsKept, before.counts);
  const counters = async (id: string) => (await ctx.sql`select 1 from broadcast_counts where broadcast_id = ${id}`).length;
  assert.equal(await counters(old), 0, 'its counters go once its counts are kept');
  assert.ok(await counters(recent) > 0, 'a recent broadcast keeps its counters');
  // Its emails go with their days (here, by hand); the counts shown stay what they were.
  await ctx.sql`delete from emails where broadcast_id = ${old} and project_id = ${projectId}`;
  const after = await get(key, old);
  assert.equal(after.status, 'sent');
  assert.deepEqual(after.counts, before.counts);
  assert.deepEqual(await recipients(key, old), [], 'no recipient is listed once their rows are gone');
  assert.equal((await get(key, recent)).counts.sent, 4);
  // 89 days is not yet due: its emails are kept two more days.
  await ctx.sql`update broadcasts set snapshot_at = now() - interval '89 days' where id = ${recent}`;
  // A second run changes nothing.
  await applyRetention(ctx.sql, DEFAULTS);
  assert.deepEqual((await get(key, old)).counts, before.counts);
  assert.equal(await rowsOf(recent), 4);
});
