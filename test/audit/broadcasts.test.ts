import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { browser, signIn, OWNER } from '../dashboard/client.ts';
import { seedSegment } from '../broadcasts/fixtures.ts';
import { seedProject, upload } from '../contacts/imports-fixtures.ts';

// CONTRACT §21.4 over §23: a broadcast's changes and a contact import are recorded, by whoever
// made them, in the transaction of the change; their content never is.

const ctx = await createTestContext({ env: { NODE_ENV: 'development', PUBLIC_BASE_URL: 'https://mail.example.test' } });

type Entry = { action: string; actorType: string; actorId: string | null; targetType: string; targetId: string; changes: Record<string, unknown> | null };
const entries = (projectId: string, prefix: string) => ctx.sql<Entry[]>`
  select action, actor_type, actor_id, target_type, target_id, changes from audit_log
  where project_id = ${projectId} and action like ${`${prefix}.%`} order by id`;

const post = (key: string, path: string, body: unknown = {}) => ctx.call(key, path, { method: 'POST', body });
const CONTENT = { name: 'Launch', from: 'news@example.test', subject: 'Big news', html: '<p>secret plans for {{{contact.first_name}}}</p>' };

test('API: create, update, schedule, cancel, send, stop, duplicate and delete each record one entry by the key', async () => {
  const { projectId, key, keyId } = await ctx.tenant('bc-audit');
  const { segmentId } = await seedSegment(ctx.sql, projectId, 3);
  const made = await post(key, '/v1/broadcasts', { ...CONTENT, segment_id: segmentId });
  assert.equal(made.status, 201);
  const { id } = (await made.json()) as { id: string };
  assert.equal((await ctx.call(key, `/v1/broadcasts/${id}`, { method: 'PATCH', body: { subject: 'Bigger news', preview_text: 'p' } })).status, 200);
  assert.equal((await post(key, `/v1/broadcasts/${id}/send`, { scheduled_at: 'in 2 hours' })).status, 200);
  assert.equal((await post(key, `/v1/broadcasts/${id}/cancel`)).status, 200);
  assert.equal((await post(key, `/v1/broadcasts/${id}/send`)).status, 200);
  // Refused changes record nothing.
  assert.equal((await ctx.call(key, `/v1/broadcasts/${id}`, { method: 'PATCH', body: { subject: 'x' } })).status, 409);
  assert.equal((await ctx.call(key, `/v1/broadcasts/${id}`, { method: 'DELETE' })).status, 409);
  assert.equal((await post(key, `/v1/broadcasts/${id}/cancel`)).status, 200);
  assert.equal((await post(key, `/v1/broadcasts/${id}/cancel`)).status, 409);
  const dup = await post(key, `/v1/broadcasts/${id}/duplicate`);
  assert.equal(dup.status, 201);
  const copy = ((await dup.json()) as { id: string }).id;
  assert.equal((await ctx.call(key, `/v1/broadcasts/${copy}`, { method: 'DELETE' })).status, 204);

  const log = await entries(projectId, 'broadcast');
  assert.deepEqual(log.map((e) => [e.action, e.targetId]), [
    ['broadcast.created', id], ['broadcast.updated', id], ['broadcast.scheduled', id], ['broadcast.canceled', id],
    ['broadcast.send_started', id], ['broadcast.canceled', id], ['broadcast.created', copy], ['broadcast.deleted', copy],
  ]);
  for (const e of log) {
    assert.deepEqual([e.actorType, e.actorId, e.targetType], ['api_key', keyId, 'broadcast'], e.action);
  }
  assert.deepEqual(log[0]!.changes, { name: 'Launch', segment_id: segmentId, topic_id: null, subject: 'Big news' });
  assert.deepEqual(log[1]!.changes!.fields, ['preview_text', 'subject']);
  assert.equal(log[1]!.changes!.subject, 'Bigger news');
  assert.match(String(log[2]!.changes!.scheduled_at), /^\d{4}-\d\d-\d\dT/);
  assert.equal(log[3]!.changes!.status, 'draft', 'a canceled schedule goes back to draft');
  assert.equal(log[5]!.changes!.status, 'canceled', 'a stopped send is canceled');
  assert.equal(log[6]!.changes!.duplicate_of, id);
  // The content is the sender's, not the log's.
  const dump = (await ctx.sql<[{ d: string }]>`select string_agg(audit_log::text, ' ') as d from audit_log where project_id = ${projectId}`)[0].d;
  assert.doesNotMatch(dump, /secret plans/);
  // The log's own route filters by the new actions.
  const listed = await ctx.call(key, '/v1/audit-log?action=broadcast.send_started');
  assert.equal(listed.status, 200);
  assert.deepEqual(((await listed.json()) as { data: { target: { id: string } }[] }).data.map((e) => e.target.id), [id]);
});

test('API: an import records contact_import.created by the key, with its options; a refused upload records nothing', async () => {
  const { projectId, key, keyId } = await ctx.tenant('import-audit');
  const { segmentId, topicId } = await seedProject(ctx.sql, projectId);
  const csv = 'email,first_name\nann@example.com,Ann\n';
  const res = await upload(ctx, key, csv, { segments: JSON.stringify([segmentId]), topics: JSON.stringify([{ id: topicId, subscription: 'opt_in' }]), on_conflict: 'skip' });
  assert.equal(res.status, 202, await res.clone().text());
  const { id } = (await res.json()) as { id: string };
  assert.equal((await upload(ctx, key, csv, { segments: '["seg_nope"]' })).status, 422);
  const log = await entries(projectId, 'contact_import');
  assert.equal(log.length, 1);
  assert.deepEqual({ ...log[0] }, {
    action: 'contact_import.created', actorType: 'api_key', actorId: keyId, targetType: 'contact_import', targetId: id,
    changes: { on_conflict: 'skip', segment_ids: [segmentId], topic_ids: [topicId], bytes: Buffer.byteLength(csv) },
  });
});

test('dashboard: a member\'s draft, send and cancel are recorded as theirs', async () => {
  const b = browser(ctx);
  await signIn(b);
  const { projectId } = await ctx.tenant('bc-dash-audit');
  const { segmentId } = await seedSegment(ctx.sql, projectId, 2);
  const P = `/dashboard/projects/${projectId}`;
  await b.get(`${P}/broadcasts`);
  const made = await b.post(`${P}/broadcasts`, { ...CONTENT, segment_id: segmentId, topic_id: '', preview_text: '', text: '' });
  assert.equal(made.res.status, 303, made.text);
  const page = made.res.headers.get('location')!;
  await b.get(page);
  assert.equal((await b.post(`${page}/send`, { scheduled_at: 'in 1 hour' })).res.status, 303);
  await b.get(page);
  assert.equal((await b.post(`${page}/cancel`)).res.status, 303);
  const [member] = await ctx.sql<[{ id: string }]>`select id from members where email = ${OWNER.email}`;
  const log = await entries(projectId, 'broadcast');
  assert.deepEqual(log.map((e) => [e.action, e.actorType, e.actorId]), [
    ['broadcast.created', 'member', member.id], ['broadcast.scheduled', 'member', member.id], ['broadcast.canceled', 'member', member.id],
  ]);
});
