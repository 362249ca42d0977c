import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';

const ctx = await createTestContext();
const alpha = await ctx.tenant('alpha');
const beta = await ctx.tenant('beta');

const body = { from: 'Acme <billing@acme.test>', to: 'alice@example.test', subject: 'Receipt', text: 'Thanks' };
const send = (key: string, payload: unknown, idem?: string) =>
  ctx.call(key, '/v1/emails', { method: 'POST', body: payload, headers: idem === undefined ? {} : { 'idempotency-key': idem } });

const count = async (table: 'emails' | 'idempotency_keys', projectId: string) =>
  (await ctx.sql`select count(*)::int as n from ${ctx.sql(table)} where project_id = ${projectId}`)[0]!.n as number;
const sendJobs = async () =>
  (await ctx.sql`select count(*)::int as n from graphile_worker.jobs where task_identifier = 'email__send'`)[0]!.n as number;

test('a repeat with the same key and body answers the first id, replayed, and writes nothing', async () => {
  const first = await send(alpha.key, body, 'order-1001');
  assert.equal(first.status, 201);
  assert.equal(first.headers.get('idempotent-replayed'), null);
  const { id } = (await first.json()) as { id: string };
  const emails = await count('emails', alpha.projectId);
  const jobs = await sendJobs();

  // Same content, different JSON spelling: key order, a one-element list for a string.
  const again = await send(alpha.key, { text: 'Thanks', subject: 'Receipt', to: ['alice@example.test'], from: 'Acme <billing@acme.test>' }, 'order-1001');
  assert.equal(again.status, 201);
  assert.equal(again.headers.get('idempotent-replayed'), 'true');
  assert.deepEqual(await again.json(), { id, status: 'queued' });
  assert.equal(await count('emails', alpha.projectId), emails);
  assert.equal(await sendJobs(), jobs);
});

test('the replay answers queued even after the email moved on', async () => {
  const { id } = (await (await send(alpha.key, body, 'order-moved')).json()) as { id: string };
  await ctx.sql`update emails set status = 'sent' where id = ${id} and project_id = ${alpha.projectId}`;
  const again = await send(alpha.key, body, 'order-moved');
  assert.deepEqual(await again.json(), { id, status: 'queued' });
});

test('the same key with a different body is a 409 idempotency_key_reused', async () => {
  await send(alpha.key, body, 'order-1002');
  const emails = await count('emails', alpha.projectId);
  const res = await send(alpha.key, { ...body, subject: 'Something else' }, 'order-1002');
  assert.equal(res.status, 409);
  const json = (await res.json()) as { error: { type: string; message: string } };
  assert.equal(json.error.type, 'idempotency_key_reused');
  assert.equal(typeof json.error.message, 'string');
  assert.equal(await count('emails', alpha.projectId), emails);
});

test('an invalid request does not consume the key', async () => {
  const bad = await send(alpha.key, { ...body, to: 'nope' }, 'order-1003');
  assert.equal(bad.status, 422);
  const good = await send(alpha.key, body, 'order-1003');
  assert.equal(good.status, 201);
  assert.equal(good.headers.get('idempotent-replayed'), null);
});

test('keys are scoped per project: two projects may use the same string', async () => {
  const a = (await (await send(alpha.key, body, 'shared-key')).json()) as { id: string };
  const b = await send(beta.key, { ...body, subject: 'Different content is fine' }, 'shared-key');
  assert.equal(b.status, 201);
  assert.equal(b.headers.get('idempotent-replayed'), null);
  const bId = ((await b.json()) as { id: string }).id;
  assert.notEqual(bId, a.id);
  // And beta's replay answers beta's email, never alpha's.
  const bAgain = await send(beta.key, { ...body, subject: 'Different content is fine' }, 'shared-key');
  assert.deepEqual(await bAgain.json(), { id: bId, status: 'queued' });
});

test('20 concurrent identical requests make one email and one job, and all answer its id', async () => {
  const project = await ctx.tenant('race');
  const jobsBefore = await sendJobs();
  const answers = await Promise.all(Array.from({ length: 20 }, () => send(project.key, body, 'race-key')));
  const statuses = answers.map((r) => r.status);
  assert.deepEqual(statuses, Array(20).fill(201));
  const ids = await Promise.all(answers.map(async (r) => ((await r.json()) as { id: string }).id));
  assert.equal(new Set(ids).size, 1);
  assert.equal(await count('emails', project.projectId), 1);
  assert.equal(await count('idempotency_keys', project.projectId), 1);
  assert.equal(await sendJobs(), jobsBefore + 1);
  const [row] = await ctx.sql`select id from emails where project_id = ${project.projectId}`;
  assert.equal(row!.id, ids[0]);
  assert.equal(answers.filter((r) => r.headers.get('idempotent-replayed') === 'true').length, 19);
});

test('concurrent requests with one key but different bodies: one email, the rest 409 or replays of it', async () => {
  const project = await ctx.tenant('race2');
  const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => send(project.key, { ...body, subject: `v${i % 2}` }, 'mixed')));
  assert.ok(answers.every((r) => r.status === 201 || r.status === 409), answers.map((r) => r.status).join());
  assert.equal(await count('emails', project.projectId), 1);
  const [row] = await ctx.sql`select id from emails where project_id = ${project.projectId}`;
  for (const r of answers.filter((a) => a.status === 201)) assert.equal(((await r.json()) as { id: string }).id, row!.id);
});

test('a key older than 24 hours is free again', async () => {
  const first = (await (await send(alpha.key, body, 'old-key')).json()) as { id: string };
  await ctx.sql`update idempotency_keys set created_at = now() - interval '25 hours' where project_id = ${alpha.projectId} and idempotency_key = 'old-key'`;
  const res = await send(alpha.key, { ...body, subject: 'new content after expiry' }, 'old-key');
  assert.equal(res.status, 201);
  assert.equal(res.headers.get('idempotent-replayed'), null);
  const second = (await res.json()) as { id: string };
  assert.notEqual(second.id, first.id);
  const [key] = await ctx.sql`select email_id from idempotency_keys where project_id = ${alpha.projectId} and idempotency_key = 'old-key'`;
  assert.equal(key!.emailId, second.id);
  const replay = await send(alpha.key, { ...body, subject: 'new content after expiry' }, 'old-key');
  assert.deepEqual(await replay.json(), { id: second.id, status: 'queued' });
});

test('without a key every request is a new email', async () => {
  const a = (await (await send(alpha.key, body)).json()) as { id: string };
  const b = (await (await send(alpha.key, body)).json()) as { id: string };
  assert.notEqual(a.id, b.id);
});
