import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { createApiKey } from '../../src/keys/service.ts';
import { seedProject, upload, waitFinished } from './imports-fixtures.ts';

// A small limit, so the 413 needs no large upload.
const ctx = await createTestContext({ env: { CONTACT_IMPORT_MAX_BYTES: '65536' } });
const worker = await startTestWorker(ctx.config, ctx.sql);
after(() => worker.stop());

type Detail = { detail: Array<{ loc: (string | number)[]; msg: string }> };
const CSV = 'email,first_name\nann@example.com,Ann\n';

async function refused(res: Response, loc: (string | number)[], msg: RegExp) {
  assert.equal(res.status, 422, await res.clone().text());
  const body = await res.json() as Detail;
  assert.ok(body.detail.some((d) => JSON.stringify(d.loc) === JSON.stringify(loc) && msg.test(d.msg)), JSON.stringify(body));
}

test('bad fields answer 422 naming the field, and nothing is queued', async () => {
  const { projectId, key } = await ctx.tenant();
  const { segmentId, topicId } = await seedProject(ctx.sql, projectId);
  await refused(await upload(ctx, key, CSV, { column_map: '{not json' }), ['body', 'column_map'], /JSON/);
  await refused(await upload(ctx, key, CSV, { segments: '"x"' }), ['body', 'segments'], /array/);
  await refused(await upload(ctx, key, CSV, { segments: JSON.stringify([segmentId, 'seg_01M8SF7C8VQN1YZXM9J46H435Q']) }), ['body', 'segments', 1], /does not exist/);
  await refused(await upload(ctx, key, CSV, { topics: JSON.stringify([{ id: topicId, subscription: 'maybe' }]) }), ['body', 'topics', 0, 'subscription'], /.+/);
  await refused(await upload(ctx, key, CSV, { topics: JSON.stringify([{ id: 'topic_nope', subscription: 'opt_in' }]) }), ['body', 'topics', 0, 'id'], /does not exist/);
  await refused(await upload(ctx, key, CSV, { on_conflict: 'merge' }), ['body', 'on_conflict'], /.+/);
  await refused(await upload(ctx, key, CSV, { column_map: JSON.stringify({ email: 'E-mail' }) }), ['body', 'column_map', 'email'], /"E-mail" is not in the file's header/);
  await refused(await upload(ctx, key, 'mail,name\na@example.com,A\n'), ['body', 'column_map', 'email'], /no email column/);
  await refused(await upload(ctx, key, CSV, { column_map: JSON.stringify({ properties: { tier: { column: 'first_name' } } }) }), ['body', 'column_map', 'properties', 'tier'], /not a declared contact property/);
  await refused(await upload(ctx, key, CSV, { column_map: JSON.stringify({ properties: { age: { column: 'first_name', type: 'string' } } }) }), ['body', 'column_map', 'properties', 'age', 'type'], /declared as number/);
  await refused(await upload(ctx, key, 'email,properties.tier\na@example.com,gold\n'), ['body', 'file'], /properties\.tier.*not a declared contact property/);
  await refused(await upload(ctx, key, ''), ['body', 'file'], /empty/);
  const noFile = new FormData();
  noFile.append('on_conflict', 'skip');
  await refused(await ctx.app.request('/v1/contacts/imports', { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: noFile }), ['body', 'file'], /required/);
  await refused(await ctx.call(key, '/v1/contacts/imports', { method: 'POST', body: { file: 'x' } }), ['header', 'content-type'], /multipart/);
  const [{ n }] = await ctx.sql<[{ n: number }]>`select (select count(*) from contact_imports) + (select count(*) from contact_import_chunks) + (select count(*) from graphile_worker.jobs) as n`;
  assert.equal(Number(n), 0);
});

test('a file over CONTACT_IMPORT_MAX_BYTES answers 413 and leaves nothing', async () => {
  const { key } = await ctx.tenant();
  const big = `email\n${'x@example.com\n'.repeat(6000)}`;
  const res = await upload(ctx, key, big);
  assert.equal(res.status, 413, await res.clone().text());
  assert.equal(((await res.json()) as { error: { type: string } }).error.type, 'payload_too_large');
  assert.equal((await ctx.sql`select 1 from contact_import_chunks`).length, 0);
});

test('a CSV that stops parsing fails the import, keeping the rows before it', async () => {
  const { key, projectId } = await ctx.tenant();
  const res = await upload(ctx, key, 'email\na@example.com\nb@example.com\n"c@example.com\n');
  assert.equal(res.status, 202);
  const done = await waitFinished(ctx, key, (await res.json() as { id: string }).id);
  assert.equal(done.status, 'failed');
  assert.match(done.failure_reason ?? '', /^line 4: Quote Not Closed/);
  assert.deepEqual(done.counts, { total: 2, created: 2, updated: 0, skipped: 0, failed: 0 });
  assert.equal((await ctx.sql`select 1 from contacts where project_id = ${projectId}`).length, 2);
});

test('only the first 100 bad rows are listed; all are counted', async () => {
  const { key } = await ctx.tenant();
  const res = await upload(ctx, key, `email\n${Array.from({ length: 150 }, (_, i) => `bad${i}`).join('\n')}\n`);
  const done = await waitFinished(ctx, key, (await res.json() as { id: string }).id);
  assert.deepEqual(done.counts, { total: 150, created: 0, updated: 0, skipped: 0, failed: 150 });
  assert.equal(done.errors.length, 100);
  assert.deepEqual([done.errors[0]!.line, done.errors[99]!.line], [2, 101]);
});

test('isolation: another project\'s import is not found, nor listed; a sending key may not import', async () => {
  const a = await ctx.tenant('a');
  const b = await ctx.tenant('b');
  const res = await upload(ctx, a.key, CSV);
  const { id } = await res.json() as { id: string };
  await waitFinished(ctx, a.key, id);
  assert.equal((await ctx.call(b.key, `/v1/contacts/imports/${id}`)).status, 404);
  assert.equal((await ctx.call(b.key, `/v1/contacts/imports?starting_after=${id}`)).status, 404);
  assert.deepEqual(((await (await ctx.call(b.key, '/v1/contacts/imports')).json()) as { data: unknown[] }).data, []);
  assert.equal((await ctx.call(a.key, '/v1/contacts/imports/cimp_nope')).status, 404);
  assert.equal((await ctx.sql`select 1 from contacts where project_id = ${b.projectId}`).length, 0);
  const sending = await createApiKey(ctx.sql, a.projectId, 'sender', 'sending');
  assert.equal((await upload(ctx, sending.key, CSV)).status, 403);
  assert.equal((await ctx.call(sending.key, `/v1/contacts/imports/${id}`)).status, 403);
  assert.equal((await upload(ctx, '', CSV)).status, 401);
});
