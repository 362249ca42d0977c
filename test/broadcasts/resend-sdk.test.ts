import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Resend } from 'resend';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';
import { seedSegment, seedTopic } from './fixtures.ts';

const ctx = await createTestContext({ env: { PUBLIC_BASE_URL: 'https://mail.example.test' } });
const server = serve({ fetch: ctx.app.fetch, hostname: '127.0.0.1', port: 0 });
await new Promise((r) => server.once('listening', r));
after(() => new Promise((r) => server.close(r)));
process.env.RESEND_BASE_URL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/resend`;

const tenant = await ctx.tenant('bc-sdk');
const resend = new Resend(tenant.key);
await startTestWorker(ctx.config, ctx.sql);

test('resend.broadcasts: create, get, list, update, send, recipients, clicked links, duplicate, cancel, remove', { timeout: 120_000 }, async () => {
  const { segmentId } = await seedSegment(ctx.sql, tenant.projectId, 5);
  const topicId = await seedTopic(ctx.sql, tenant.projectId, 'opt_in');
  const created = await resend.broadcasts.create({ name: 'Launch', segmentId, topicId, from: 'News <news@example.test>', subject: 'Hi {{{FIRST_NAME|there}}}', html: '<p>Hi</p>', replyTo: 'r@example.test' });
  assert.equal(created.error, null);
  const id = created.data!.id;
  assert.match(id, /^bc_/);

  const got = await resend.broadcasts.get(id);
  assert.equal(got.error, null);
  assert.equal(got.data!.object, 'broadcast');
  assert.equal(got.data!.status, 'draft');
  assert.equal(got.data!.segment_id, segmentId);
  assert.equal(got.data!.topic_id, topicId);
  assert.deepEqual(got.data!.reply_to, ['r@example.test']);

  const updated = await resend.broadcasts.update(id, { subject: 'Hello {{{FIRST_NAME|there}}}' });
  assert.equal(updated.error, null);
  assert.equal((await resend.broadcasts.get(id)).data!.subject, 'Hello {{{FIRST_NAME|there}}}');

  const listed = await resend.broadcasts.list();
  assert.equal(listed.error, null);
  assert.deepEqual(listed.data!.data.map((b) => b.id), [id]);

  const sent = await resend.broadcasts.send(id);
  assert.equal(sent.error, null);
  assert.equal((await resend.broadcasts.get(id)).data!.status, 'queued', 'sending is queued in Resend\'s terms');
  await waitFor('the broadcast to be sent', async () => (await resend.broadcasts.get(id)).data!.status === 'sent', 90_000, 200);
  const recipients = await resend.broadcasts.recipients(id, { type: 'sent' });
  assert.equal(recipients.error, null);
  assert.equal(recipients.data!.data.length, 5);
  const links = await resend.broadcasts.clickedLinks(id);
  assert.equal(links.error, null);
  assert.deepEqual(links.data!.data, []);
  const removeSent = await resend.broadcasts.remove(id);
  assert.equal(removeSent.error?.statusCode, 422, 'a sent broadcast cannot be removed');

  const dup = await resend.broadcasts.duplicate(id);
  assert.equal(dup.error, null);
  const copy = dup.data!.id;
  const scheduled = await resend.broadcasts.send(copy, { scheduledAt: 'in 1 hour' });
  assert.equal(scheduled.error, null);
  assert.equal((await resend.broadcasts.get(copy)).data!.status, 'queued');
  assert.equal((await resend.broadcasts.cancel(copy)).error, null);
  assert.equal((await resend.broadcasts.get(copy)).data!.status, 'draft', 'a canceled schedule is a draft');
  const removed = await resend.broadcasts.remove(copy);
  assert.equal(removed.error, null);
  assert.equal(removed.data!.deleted, true);
  assert.equal((await resend.broadcasts.get(copy)).error?.statusCode, 404);

  // create with send and a natural-language schedule, using the older audienceId.
  const later = await resend.broadcasts.create({ audienceId: segmentId, from: 'a@example.test', subject: 's', text: 't', send: true, scheduledAt: 'tomorrow at 9am' });
  assert.equal(later.error, null);
  const row = (await resend.broadcasts.get(later.data!.id)).data!;
  assert.equal(row.status, 'queued');
  assert.ok(row.scheduled_at && row.scheduled_at.endsWith('T09:00:00.000Z'));
});
