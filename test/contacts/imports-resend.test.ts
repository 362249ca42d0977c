import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Resend } from 'resend';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { existingContact, seedProject, waitFinished } from './imports-fixtures.ts';

const ctx = await createTestContext({ env: { CONTACT_IMPORT_MAX_BYTES: '1048576' } });
const worker = await startTestWorker(ctx.config, ctx.sql);
after(() => worker.stop());
const server = serve({ fetch: ctx.app.fetch, hostname: '127.0.0.1', port: 0 });
await new Promise((r) => server.once('listening', r));
after(() => new Promise((r) => server.close(r)));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/resend`;
process.env.RESEND_BASE_URL = base;

const CSV = 'E-mail,Name,Plan\nann@example.com,Ann,pro\nold@example.com,Olga,free\nnope,X,\n';

test('resend.contacts.imports create, get and list, over HTTP as the SDK sends them', async () => {
  const { projectId, key } = await ctx.tenant();
  const { segmentId, topicId } = await seedProject(ctx.sql, projectId);
  await existingContact(ctx.sql, projectId, 'old@example.com', { firstName: 'Old' });
  const resend = new Resend(key);

  const created = await resend.contacts.imports.create({
    file: new Blob([CSV], { type: 'text/csv' }),
    columnMap: { email: 'E-mail', firstName: 'Name', properties: { plan: { column: 'Plan', type: 'string' } } },
    onConflict: 'skip',
    segments: [{ id: segmentId }],
    topics: [{ id: topicId, subscription: 'opt_in' }],
  });
  assert.equal(created.error, null, JSON.stringify(created.error));
  assert.equal(created.data!.object, 'contact_import');
  const id = created.data!.id;
  await waitFinished(ctx, key, id);

  const got = await resend.contacts.imports.get(id);
  assert.equal(got.error, null);
  assert.deepEqual({ ...got.data!, created_at: undefined, completed_at: undefined }, {
    object: 'contact_import', id, status: 'completed', created_at: undefined, completed_at: undefined,
    counts: { total: 3, created: 1, updated: 0, skipped: 1, failed: 1 },
  });
  assert.ok(Date.parse(got.data!.completed_at!) >= Date.parse(got.data!.created_at));
  const [ann] = await ctx.sql<[{ firstName: string; properties: unknown; segments: number; topics: number }]>`
    select first_name, properties,
      (select count(*)::int from contact_segments s where s.contact_id = c.id) as segments,
      (select count(*)::int from contact_topics t where t.contact_id = c.id and t.subscription = 'opt_in') as topics
    from contacts c where project_id = ${projectId} and email = 'ann@example.com'`;
  assert.deepEqual(ann, { firstName: 'Ann', properties: { plan: 'pro' }, segments: 1, topics: 1 });

  const second = await resend.contacts.imports.create({ file: new Blob(['email\nzed@example.com\n']) });
  await waitFinished(ctx, key, second.data!.id);
  const list = await resend.contacts.imports.list({ limit: 1 });
  assert.equal(list.error, null);
  assert.deepEqual([list.data!.object, list.data!.has_more, list.data!.data.map((d) => d.id)], ['list', true, [second.data!.id]]);
  const next = await resend.contacts.imports.list({ limit: 1, after: second.data!.id });
  assert.deepEqual(next.data!.data.map((d) => d.id), [id]);
  const completed = await resend.contacts.imports.list({ status: 'completed' });
  assert.equal(completed.data!.data.length, 2);
  const failed = await resend.contacts.imports.list({ status: 'failed' });
  assert.equal(failed.data!.data.length, 0);
});

test('errors in Resend\'s shape: an unknown segment, too large a file, another project\'s import', async () => {
  const a = await ctx.tenant('a');
  const b = await ctx.tenant('b');
  const resendA = new Resend(a.key);
  const bad = await resendA.contacts.imports.create({ file: new Blob([CSV]), columnMap: { email: 'E-mail' }, segments: [{ id: 'seg_01M8SF7C8VQN1YZXM9J46H435Q' }] });
  assert.equal(bad.error?.name, 'validation_error');
  assert.match(bad.error!.message, /segments\.0: segment seg_01M8SF7C8VQN1YZXM9J46H435Q does not exist/);

  const big = await resendA.contacts.imports.create({ file: new Blob([`email\n${'x@example.com\n'.repeat(90_000)}`]) });
  assert.equal(big.error?.name, 'validation_error');
  assert.match(big.error!.message, /exceeds 1048576 bytes/);

  const ok = await resendA.contacts.imports.create({ file: new Blob(['email\nq@example.com\n']) });
  const other = await new Resend(b.key).contacts.imports.get(ok.data!.id);
  assert.equal(other.error?.name, 'not_found');
  assert.deepEqual((await new Resend(b.key).contacts.imports.list()).data!.data, []);
});
