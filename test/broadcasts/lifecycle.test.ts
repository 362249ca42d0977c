import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { seedSegment } from './fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import { insertEmail } from '../sending/fixtures.ts';
import { parseScheduledAt } from '../../src/broadcasts/schedule.ts';
import { broadcastSendTask, BROADCAST_FIRST_PAGE_SIZE } from '../../src/broadcasts/send.task.ts';
import { createLogger } from '../../src/platform/log.ts';

const ctx = await createTestContext({ env: { PUBLIC_BASE_URL: 'https://mail.example.test' } });

async function draft(key: string, segmentId: string) {
  const res = await ctx.call(key, '/v1/broadcasts', { method: 'POST', body: { name: 'n', segment_id: segmentId, from: 'a@example.test', subject: 's', html: '<p>x</p>' } });
  assert.equal(res.status, 201);
  return ((await res.json()) as { id: string }).id;
}
const post = (key: string, path: string, body?: unknown) => ctx.call(key, path, { method: 'POST', body: body ?? {} });

test('natural-language and ISO scheduling; past 30 days or unparseable is 422', async () => {
  const now = new Date('2026-12-01T19:00:00Z');
  assert.equal((await parseScheduledAt('in 1 hour', now)).toISOString(), '2026-12-01T20:00:00.000Z');
  assert.equal((await parseScheduledAt('tomorrow at 9am', now)).toISOString(), '2026-12-02T09:00:00.000Z');
  await assert.rejects(parseScheduledAt('in 31 days', now));
  await assert.rejects(parseScheduledAt('whenever you like', now));

  const { projectId, key } = await ctx.tenant('bc-schedule');
  const { segmentId } = await seedSegment(ctx.sql, projectId, 3);
  const id = await draft(key, segmentId);
  const res = await post(key, `/v1/broadcasts/${id}/send`, { scheduled_at: 'in 1 hour' });
  assert.equal(res.status, 200);
  const b = (await res.json()) as { status: string; scheduled_at: string };
  assert.equal(b.status, 'scheduled');
  const ahead = Date.parse(b.scheduled_at) - Date.now();
  assert.ok(ahead > 3_540_000 && ahead <= 3_600_000, `an hour ahead (${ahead})`);
  const [job] = await ctx.sql<[{ runAt: Date; priority: number }?]>`select run_at, priority from graphile_worker.jobs where key = ${`broadcast__send:${id}`}`;
  assert.equal(job?.runAt.toISOString(), b.scheduled_at, 'its job waits for the schedule');
  assert.equal((await post(key, `/v1/broadcasts/${(await draft(key, segmentId))}/send`, { scheduled_at: 'in 40 days' })).status, 422);
  assert.equal((await post(key, `/v1/broadcasts/${(await draft(key, segmentId))}/send`, { scheduled_at: 'no idea' })).status, 422);
  // Scheduled: may still change, and cancel takes it back to draft with its job gone.
  assert.equal((await ctx.call(key, `/v1/broadcasts/${id}`, { method: 'PATCH', body: { subject: 'new' } })).status, 200);
  const canceled = await post(key, `/v1/broadcasts/${id}/cancel`);
  assert.equal(((await canceled.json()) as { status: string }).status, 'draft');
  const [gone] = await ctx.sql`select 1 from graphile_worker.jobs where key = ${`broadcast__send:${id}`}`;
  assert.equal(gone, undefined);
});

test('sending: no update or delete (409), cancel stops it and cancels its queued copies; duplicate makes a draft; delete a draft', async () => {
  const { projectId, key } = await ctx.tenant('bc-rules');
  const { segmentId } = await seedSegment(ctx.sql, projectId, 3);
  const id = await draft(key, segmentId);
  assert.equal((await post(key, `/v1/broadcasts/${id}/cancel`)).status, 409, 'a draft cannot be canceled');
  assert.equal((await post(key, `/v1/broadcasts/${id}/send`)).status, 200);
  const patch = await ctx.call(key, `/v1/broadcasts/${id}`, { method: 'PATCH', body: { subject: 'x' } });
  assert.equal(patch.status, 409);
  assert.equal(((await patch.json()) as { error: { type: string } }).error.type, 'broadcast_not_editable');
  assert.equal((await ctx.call(key, `/v1/broadcasts/${id}`, { method: 'DELETE' })).status, 409);
  assert.equal((await post(key, `/v1/broadcasts/${id}/send`)).status, 409, 'sent only once');
  const stop = await post(key, `/v1/broadcasts/${id}/cancel`);
  assert.equal(((await stop.json()) as { status: string }).status, 'canceled');
  assert.equal((await ctx.call(key, `/v1/broadcasts/${id}`, { method: 'DELETE' })).status, 409);

  const dup = await post(key, `/v1/broadcasts/${id}/duplicate`);
  assert.equal(dup.status, 201);
  const copy = (await dup.json()) as { id: string; status: string; segment_id: string };
  assert.equal(copy.status, 'draft');
  assert.equal(copy.segment_id, segmentId);
  assert.notEqual(copy.id, id);
  assert.equal((await ctx.call(key, `/v1/broadcasts/${copy.id}`, { method: 'DELETE' })).status, 204);
  assert.equal((await ctx.call(key, `/v1/broadcasts/${copy.id}`)).status, 404);
  const list = (await (await ctx.call(key, '/v1/broadcasts')).json()) as { data: { id: string; html: string | null }[] };
  assert.deepEqual(list.data.map((b) => b.id), [id]);
  assert.equal(list.data[0]!.html, null, 'list items carry no bodies');
});

test('errors: unknown segment or topic, no content, unknown fields, malformed ids', async () => {
  const { projectId, key } = await ctx.tenant('bc-errors');
  const { segmentId } = await seedSegment(ctx.sql, projectId, 1);
  const bad = await ctx.call(key, '/v1/broadcasts', { method: 'POST', body: { segment_id: 'seg_01ARZ3NDEKTSV4RRFFQ69G5FAV', topic_id: 'topic_x', from: 'a@example.test', subject: 's' } });
  assert.equal(bad.status, 422);
  const detail = ((await bad.json()) as { detail: { loc: string[] }[] }).detail.map((d) => d.loc.join('.'));
  assert.deepEqual(detail, ['body.segment_id', 'body.topic_id', 'body.html']);
  assert.equal((await ctx.call(key, '/v1/broadcasts', { method: 'POST', body: { segment_id: segmentId, from: 'nope', subject: 's', html: 'x' } })).status, 422);
  assert.equal((await ctx.call(key, '/v1/broadcasts', { method: 'POST', body: { segment_id: segmentId, from: 'a@example.test', subject: 's', html: 'x', extra: 1 } })).status, 422);
  assert.equal((await ctx.call(key, '/v1/broadcasts/bc_%00')).status, 404);
  assert.equal((await ctx.call(key, '/v1/broadcasts/bc_01ARZ3NDEKTSV4RRFFQ69G5FAV')).status, 404);
});

test('isolation: another project sees nothing, cannot use a segment it does not own, and a sending key may not manage broadcasts', async () => {
  const a = await ctx.tenant('bc-a');
  const b = await ctx.tenant('bc-b');
  const { segmentId } = await seedSegment(ctx.sql, a.projectId, 1);
  const id = await draft(a.key, segmentId);
  assert.equal((await ctx.call(b.key, `/v1/broadcasts/${id}`)).status, 404);
  assert.equal((await post(b.key, `/v1/broadcasts/${id}/send`)).status, 404);
  assert.equal((await ctx.call(b.key, `/v1/broadcasts/${id}`, { method: 'DELETE' })).status, 404);
  assert.equal((await ctx.call(b.key, '/v1/broadcasts', { method: 'POST', body: { segment_id: segmentId, from: 'a@example.test', subject: 's', html: 'x' } })).status, 422);
  assert.deepEqual(((await (await ctx.call(b.key, '/v1/broadcasts')).json()) as { data: unknown[] }).data, []);
  const { createApiKey } = await import('../../src/keys/service.ts');
  const sending = await createApiKey(ctx.sql, a.projectId, 'sending', 'sending');
  assert.equal((await ctx.call(sending.key, '/v1/broadcasts')).status, 403);
  assert.equal((await post(sending.key, `/v1/broadcasts/${id}/send`)).status, 403);
});

test('a cancel whose copies a worker\'s shared commit holds in the other order is retried after the deadlock, not answered 500', async () => {
  const { projectId, key } = await ctx.tenant('bc-deadlock');
  const { segmentId } = await seedSegment(ctx.sql, projectId, 2);
  const id = await draft(key, segmentId);
  assert.equal((await post(key, `/v1/broadcasts/${id}/send`)).status, 200);
  // Two queued copies, as the page writer leaves them (no worker runs here).
  const copies: string[] = [];
  for (const to of ['one@example.net', 'two@example.net']) {
    copies.push(await insertEmail(ctx.sql, projectId, { to: [to] }, false));
    await ctx.sql`update emails set broadcast_id = ${id} where id = ${copies.at(-1)!} and project_id = ${projectId}`;
  }
  const [first, second] = copies as [string, string];
  // A worker's shared transaction: it holds the second copy, and will want the first.
  const worker = await ctx.sql.reserve();
  try {
    await worker`begin`;
    await worker`update emails set updated_at = now() where id = ${second} and project_id = ${projectId}`;
    const canceling = post(key, `/v1/broadcasts/${id}/cancel`);
    // The cancel holds the first copy and waits for the second.
    await waitFor('the cancel to wait for the held copy', async () => (await ctx.sql`
      select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like '%status = ''canceled''%'`).length === 1, 10_000, 20);
    // The worker reaches for the first: a deadlock, which PostgreSQL ends by failing the cancel's try.
    await worker`update emails set updated_at = now() where id = ${first} and project_id = ${projectId}`;
    await worker`commit`;
    const res = await canceling;
    assert.equal(res.status, 200, await res.clone().text());
    assert.equal(((await res.json()) as { status: string }).status, 'canceled');
  } finally {
    await worker`rollback`.catch(() => {});
    worker.release();
  }
  const rows = await ctx.sql<{ status: string }[]>`select status from emails where broadcast_id = ${id} and project_id = ${projectId}`;
  assert.deepEqual(rows.map((r) => r.status), ['canceled', 'canceled']);
});

test('a cancel takes its queued copies\' waiting jobs with them; a job a worker holds stays', async () => {
  const { projectId, key } = await ctx.tenant('bc-cancel-jobs');
  const { segmentId } = await seedSegment(ctx.sql, projectId, 3);
  const id = await draft(key, segmentId);
  assert.equal((await post(key, `/v1/broadcasts/${id}/send`)).status, 200);
  // The page writer, with no worker to send: three copies wait with their jobs.
  await broadcastSendTask({ config: ctx.config, sql: ctx.sql, log: createLogger('silent') })({ broadcast_id: id, project_id: projectId }, undefined as never);
  const copies = await ctx.sql<{ id: string }[]>`select id from emails where broadcast_id = ${id} and project_id = ${projectId} order by id`;
  assert.equal(copies.length, 3);
  const jobs = () => ctx.sql<{ key: string }[]>`select key from graphile_worker._private_jobs where key = any(${copies.map((c) => c.id)}::text[]) order by key`;
  assert.equal((await jobs()).length, 3);
  // A worker holds the first copy's job.
  await ctx.sql`update graphile_worker._private_jobs set locked_at = now(), locked_by = 'a-worker' where key = ${copies[0]!.id}`;
  const res = await post(key, `/v1/broadcasts/${id}/cancel`);
  assert.equal(((await res.json()) as { status: string }).status, 'canceled');
  assert.deepEqual((await jobs()).map((j) => j.key), [copies[0]!.id], 'only the held job is left');
  const statuses = await ctx.sql<{ status: string }[]>`select status from emails where broadcast_id = ${id} and project_id = ${projectId}`;
  assert.deepEqual(statuses.map((r) => r.status), ['canceled', 'canceled', 'canceled']);
});

test('a broadcast\'s first page is small, so its first copies leave while the next pages are made', async () => {
  const { projectId, key } = await ctx.tenant('bc-first-page');
  const { segmentId } = await seedSegment(ctx.sql, projectId, BROADCAST_FIRST_PAGE_SIZE + 5);
  const id = await draft(key, segmentId);
  assert.equal((await post(key, `/v1/broadcasts/${id}/send`)).status, 200);
  const task = broadcastSendTask({ config: ctx.config, sql: ctx.sql, log: createLogger('silent') });
  const made = async () => (await ctx.sql<[{ n: number }]>`select count(*)::int as n from emails where broadcast_id = ${id} and project_id = ${projectId}`)[0].n;
  await task({ broadcast_id: id, project_id: projectId }, undefined as never);
  assert.equal(await made(), BROADCAST_FIRST_PAGE_SIZE);
  await task({ broadcast_id: id, project_id: projectId }, undefined as never);
  assert.equal(await made(), BROADCAST_FIRST_PAGE_SIZE + 5);
  const [b] = await ctx.sql<[{ pagedAt: Date | null }]>`select paged_at from broadcasts where id = ${id} and project_id = ${projectId}`;
  assert.ok(b.pagedAt, 'the second page reached the end');
});
