import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';
import { existingContact, generatedCsv, getImportBody, seedProject, upload, waitFinished } from './imports-fixtures.ts';

const ctx = await createTestContext();
const worker = await startTestWorker(ctx.config, ctx.sql);
after(() => worker.stop());

const CSV = [
  'Email,First,last_name,unsubscribed,properties.plan,Age',
  'ann@example.com,Ann,Lee,false,pro,34',           // 2: created
  'not-an-address,Bob,,,,',                          // 3: failed
  'bob@example.com,Bob,Stone,yes,free,',             // 4: updated (already a contact)
  'ANN@example.com,Annie,,,,35',                     // 5: the same address again: updated
  'cy@example.com,"Cy, Jr.","multi',                 // 6: a quoted field over two lines
  'line",,,40',                                      // 7
  'dee@example.com,Dee,,maybe,,',                    // 8: failed, unsubscribed not a boolean
  'eve@example.com,Eve,,,,forty',                    // 9: failed, age not a number
  '',                                                // 10: empty, skipped over
  'Ann Example <fay@example.com>,Fay,,,,',           // 11: failed, a display name is not an address
  'gus@example.com',                                 // 12: created, short row
].join('\r\n');

test('an import creates, updates, reports bad rows by line, and applies segments and topics', async () => {
  const { projectId, key } = await ctx.tenant();
  const { segmentId, topicId } = await seedProject(ctx.sql, projectId);
  const bobId = await existingContact(ctx.sql, projectId, 'Bob@Example.com', { firstName: 'Robert', properties: { plan: 'old', seen: 'yes' } });

  const res = await upload(ctx, key, CSV, {
    column_map: JSON.stringify({ first_name: 'First', properties: { age: { column: 'Age', type: 'number' } } }),
    segments: JSON.stringify([{ id: segmentId }]),
    topics: JSON.stringify([{ id: topicId, subscription: 'opt_out' }]),
  });
  assert.equal(res.status, 202, await res.clone().text());
  const { id } = await res.json() as { id: string };
  assert.match(id, /^cimp_[0-9A-HJKMNP-TV-Z]{26}$/);

  const done = await waitFinished(ctx, key, id);
  assert.equal(done.status, 'completed', done.failure_reason ?? '');
  assert.deepEqual(done.counts, { total: 9, created: 3, updated: 2, skipped: 0, failed: 4 });
  assert.deepEqual(done.errors.map((e) => e.line), [3, 8, 9, 11]);
  assert.match(done.errors[0]!.reason, /not-an-address.*not a valid address/);
  assert.match(done.errors[1]!.reason, /unsubscribed "maybe"/);
  assert.match(done.errors[2]!.reason, /properties\.age "forty" is not a number/);
  assert.equal(done.progress.bytes_done, done.progress.bytes_total);
  assert.ok(done.started_at && done.completed_at);

  const contacts = await ctx.sql<{ id: string; email: string; firstName: string | null; lastName: string | null; unsubscribed: boolean; properties: Record<string, unknown> }[]>`
    select id, email, first_name, last_name, unsubscribed, properties from contacts where project_id = ${projectId} order by lower(email)`;
  assert.deepEqual(contacts.map((c) => c.email), ['ann@example.com', 'Bob@Example.com', 'cy@example.com', 'gus@example.com']);
  const [ann, bob, cy, gus] = contacts;
  assert.deepEqual([ann!.firstName, ann!.lastName, ann!.properties], ['Annie', 'Lee', { plan: 'pro', age: 35 }]);
  assert.deepEqual([bob!.id, bob!.firstName, bob!.lastName, bob!.unsubscribed, bob!.properties], [bobId, 'Bob', 'Stone', true, { plan: 'free', seen: 'yes' }]);
  assert.deepEqual([cy!.firstName, cy!.lastName, cy!.properties], ['Cy, Jr.', 'multi\r\nline', { age: 40 }]);
  assert.deepEqual([gus!.firstName, gus!.unsubscribed], [null, false]);

  const members = await ctx.sql`select contact_id from contact_segments where segment_id = ${segmentId} and project_id = ${projectId}`;
  assert.equal(members.length, 4);
  const subs = await ctx.sql<{ subscription: string }[]>`select subscription from contact_topics where topic_id = ${topicId} and project_id = ${projectId}`;
  assert.deepEqual(subs.map((s) => s.subscription), ['opt_out', 'opt_out', 'opt_out', 'opt_out']);

  // The contacts API reads what the import wrote.
  const viaApi = await ctx.call(key, '/v1/contacts/ann@example.com');
  assert.equal(viaApi.status, 200);
  const annApi = await viaApi.json() as { id: string; first_name: string; segment_ids?: string[] };
  assert.deepEqual([annApi.id, annApi.first_name], [ann!.id, 'Annie']);

  // No upload is kept once the import is over.
  assert.equal((await ctx.sql`select 1 from contact_import_chunks where import_id = ${id}`).length, 0);
});

test('on_conflict skip leaves existing contacts, and repeats in the file, untouched', async () => {
  const { projectId, key } = await ctx.tenant();
  const { segmentId } = await seedProject(ctx.sql, projectId);
  await existingContact(ctx.sql, projectId, 'old@example.com', { firstName: 'Old' });
  const csv = 'email,first_name\nold@example.com,New\nnew@example.com,Nina\nNEW@example.com,Again\n';
  const res = await upload(ctx, key, csv, { on_conflict: 'skip', segments: JSON.stringify([segmentId]) });
  assert.equal(res.status, 202);
  const done = await waitFinished(ctx, key, (await res.json() as { id: string }).id);
  assert.deepEqual(done.counts, { total: 3, created: 1, updated: 0, skipped: 2, failed: 0 });
  assert.equal(done.on_conflict, 'skip');
  const rows = await ctx.sql<{ email: string; firstName: string }[]>`select email, first_name from contacts where project_id = ${projectId} order by email`;
  assert.deepEqual(rows.map((r) => [r.email, r.firstName]), [['new@example.com', 'Nina'], ['old@example.com', 'Old']]);
  // Only the contact the import made joins the segment.
  const members = await ctx.sql<{ email: string }[]>`
    select c.email from contact_segments s join contacts c on c.id = s.contact_id where s.segment_id = ${segmentId}`;
  assert.deepEqual(members.map((m) => m.email), ['new@example.com']);
});

test('progress is visible while a large file imports, and the list pages', async () => {
  const { projectId, key } = await ctx.tenant();
  await seedProject(ctx.sql, projectId);
  const rows = 40_000;
  const res = await upload(ctx, key, generatedCsv(rows));
  assert.equal(res.status, 202);
  const { id } = await res.json() as { id: string };
  const seen = await waitFor('a part-done import', async () => {
    const body = await getImportBody(ctx, key, id);
    if (body.status === 'completed') throw new Error('the import finished before any progress was seen');
    return body.status === 'in_progress' && body.counts.total > 0 ? body : undefined;
  }, 60_000, 10);
  assert.ok(seen.counts.total < rows);
  assert.ok(seen.progress.bytes_done > 0 && seen.progress.bytes_done < seen.progress.bytes_total);
  assert.equal(seen.counts.created, seen.counts.total);
  const done = await waitFinished(ctx, key, id, 120_000);
  assert.deepEqual(done.counts, { total: rows, created: rows, updated: 0, skipped: 0, failed: 0 });
  assert.equal((await ctx.sql`select count(*)::int as n from contacts where project_id = ${projectId}`)[0]!.n, rows);

  const second = await upload(ctx, key, generatedCsv(3, 'again'));
  const secondId = (await second.json() as { id: string }).id;
  await waitFinished(ctx, key, secondId);
  const page1 = await (await ctx.call(key, '/v1/contacts/imports?limit=1')).json() as { data: Array<{ id: string }>; has_more: boolean };
  assert.deepEqual([page1.data.map((d) => d.id), page1.has_more], [[secondId], true]);
  const page2 = await (await ctx.call(key, `/v1/contacts/imports?limit=1&starting_after=${secondId}`)).json() as { data: Array<{ id: string }>; has_more: boolean };
  assert.deepEqual([page2.data.map((d) => d.id), page2.has_more], [[id], false]);
  const failedOnly = await (await ctx.call(key, '/v1/contacts/imports?status=failed')).json() as { data: unknown[] };
  assert.equal(failedOnly.data.length, 0);
});
