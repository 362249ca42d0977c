import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';
import { seedSegment, seedTopic, setSubscription } from './fixtures.ts';

const ctx = await createTestContext({ env: { PUBLIC_BASE_URL: 'https://mail.example.test' } });
await startTestWorker(ctx.config, ctx.sql);

const settled = (id: string) => waitFor(`email ${id} to settle`, async () => {
  const [row] = await ctx.sql<[{ status: string; lastError: string | null }?]>`select status, last_error from emails where id = ${id}`;
  return row && (row.status === 'sent' || row.status === 'failed') && row;
}, 60_000, 100);

test('emails.send with topic_id skips a contact who opted out and carries the topic\'s one-click unsubscribe', { timeout: 120_000 }, async () => {
  const { projectId, key } = await ctx.tenant('topic-send');
  const { contactIds, email } = await seedSegment(ctx.sql, projectId, 2);
  const topicId = await seedTopic(ctx.sql, projectId, 'opt_in');
  await setSubscription(ctx.sql, projectId, contactIds[0]!, topicId, 'opt_out');
  const send = async (to: string | string[], topic = topicId) => {
    const res = await ctx.call(key, '/v1/emails', { method: 'POST', body: { from: 'a@example.test', to, subject: 'Digest', text: 'x', topic_id: topic } });
    assert.equal(res.status, 201, await res.clone().text());
    return ((await res.json()) as { id: string }).id;
  };
  const out = await send(email(0));
  assert.equal((await settled(out)).status, 'failed');
  const [none] = await ctx.sql`select 1 from sink_messages where email_id = ${out}`;
  assert.equal(none, undefined, 'an opted-out contact gets nothing');

  const mixed = await send([email(0), email(1), 'stranger@example.test']);
  assert.equal((await settled(mixed)).status, 'sent');
  const [m] = await ctx.sql<[{ raw: Buffer }]>`select raw from sink_messages where email_id = ${mixed}`;
  assert.ok(!/^List-Unsubscribe:/mi.test(m.raw.toString()), 'several recipients: no one-click link');

  const one = await send(email(1));
  assert.equal((await settled(one)).status, 'sent');
  const [caught] = await ctx.sql<[{ raw: Buffer }]>`select raw from sink_messages where email_id = ${one}`;
  const link = /^List-Unsubscribe: <(https:\/\/mail\.example\.test\/unsubscribe\/c\.[^>]+)>/mi.exec(caught.raw.toString().replace(/\r\n[ \t]+/g, ' '))?.[1];
  assert.ok(link, 'the topic\'s contact link, not the address-wide one');
  const post = await ctx.app.request(new URL(link).pathname, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });
  assert.equal(post.status, 200);
  const [sub] = await ctx.sql<[{ subscription: string }]>`select subscription from contact_topics where contact_id = ${contactIds[1]!} and topic_id = ${topicId}`;
  assert.equal(sub.subscription, 'opt_out');
  const [supp] = await ctx.sql`select 1 from suppressions where project_id = ${projectId}`;
  assert.equal(supp, undefined, 'a topic unsubscribe suppresses no address');

  const other = await ctx.tenant('topic-other');
  const foreign = await ctx.call(other.key, '/v1/emails', { method: 'POST', body: { from: 'a@example.test', to: 'x@example.test', subject: 's', text: 'x', topic_id: topicId } });
  assert.equal(foreign.status, 422, 'another project\'s topic is refused');
});
