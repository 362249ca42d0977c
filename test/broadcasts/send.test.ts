import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';
import { caughtMail, seedSegment, seedTopic, setSubscription } from './fixtures.ts';

const ctx = await createTestContext({ env: { PUBLIC_BASE_URL: 'https://mail.example.test' } });
await startTestWorker(ctx.config, ctx.sql);

const get = async (key: string, id: string) => (await (await ctx.call(key, `/v1/broadcasts/${id}`)).json()) as { status: string; counts: Record<string, number> };

test('a broadcast reaches exactly the right contacts, once each, personalised, with RFC 8058 headers', { timeout: 120_000 }, async () => {
  const { projectId, key } = await ctx.tenant('bc-happy');
  const n = 300;
  const { segmentId, contactIds, email } = await seedSegment(ctx.sql, projectId, n);
  const topicId = await seedTopic(ctx.sql, projectId, 'opt_in');
  await ctx.sql`insert into contact_properties (id, project_id, key, type, fallback_value) values ('cprop_01JZZZZZZZZZZZZZZZZZZZZZZZ', ${projectId}, 'plan', 'string', '"free"')`;
  // Excluded: 10 unsubscribed, 10 opted out of the topic, 10 suppressed; and a member added after send.
  const unsubscribed = contactIds.slice(0, 10);
  const optedOut = contactIds.slice(10, 20);
  await ctx.sql`update contacts set unsubscribed = true where id = any(${unsubscribed})`;
  for (const id of optedOut) await setSubscription(ctx.sql, projectId, id, topicId, 'opt_out');
  const suppressedEmails = Array.from({ length: 10 }, (_, i) => email(20 + i));
  await ctx.sql`insert into suppressions (project_id, address, reason) select ${projectId}, a, 'manual' from unnest(${suppressedEmails}::text[]) a`;

  const created = await ctx.call(key, '/v1/broadcasts', { method: 'POST', body: {
    name: 'Launch', segment_id: segmentId, topic_id: topicId, from: 'News <news@example.test>',
    subject: 'Hi {{{contact.first_name|there}}}', preview_text: 'big news',
    html: '<p>Hello {{{FIRST_NAME|friend}}}, plan {{{contact.plan}}} / {{{contact.plan|none}}} for {{{EMAIL}}}</p>',
    text: 'Hello {{{contact.first_name|there}}}. Leave: {{{RESEND_UNSUBSCRIBE_URL}}}',
  } });
  assert.equal(created.status, 201, await created.clone().text());
  const b = (await created.json()) as { id: string; status: string };
  assert.equal(b.status, 'draft');

  const started = Date.now();
  const sent = await ctx.call(key, `/v1/broadcasts/${b.id}/send`, { method: 'POST', body: {} });
  assert.equal(sent.status, 200);
  assert.equal(((await sent.json()) as { status: string }).status, 'sending');
  assert.ok(Date.now() - started < 2000, 'sending starts within 2 s');
  // A member added after send is not a recipient.
  const late = await seedSegment(ctx.sql, projectId, 1, 'late');
  await ctx.sql`insert into contact_segments (segment_id, contact_id, project_id) values (${segmentId}, ${late.contactIds[0]!}, ${projectId})`;

  await waitFor('the broadcast to be sent', async () => (await get(key, b.id)).status === 'sent', 90_000, 200);
  const mail = await caughtMail(ctx.sql, projectId);
  const expected = new Set(Array.from({ length: n }, (_, i) => email(i)).slice(30));
  assert.equal(mail.length, expected.size, 'one email per recipient');
  assert.deepEqual(new Set(mail.map((m) => m.to)), expected);

  const counts = (await get(key, b.id)).counts;
  assert.equal(counts.recipients, n - 30);
  assert.equal(counts.suppressed, 10);
  assert.equal(counts.sent, n - 30);
  assert.equal(counts.queued, 0);

  const m = mail.find((x) => x.to === email(31))!; // contact 32: even, so named; 32 % 3 != 0
  assert.equal(m.subject, 'Hi Name32');
  assert.match(m.html!, /Hello Name32, plan free \/ none for c32@example\.test/);
  const m3 = mail.find((x) => x.to === email(32))!; // contact 33: no first name, plan pro
  assert.equal(m3.subject, 'Hi there');
  assert.match(m3.html!, /Hello friend, plan pro \/ pro/);
  assert.match(m3.html!, /display:none[^>]*>big news/);
  // Headers: one-click, under PUBLIC_BASE_URL; the html (no placeholder) got a footer link, the text used its placeholder.
  const unfolded = m.raw.replace(/\r\n[ \t]+/g, ' ');
  const link = /^List-Unsubscribe: <(https:\/\/mail\.example\.test\/unsubscribe\/[^>]+)>/mi.exec(unfolded)?.[1];
  assert.ok(link, 'List-Unsubscribe names an https URL under PUBLIC_BASE_URL');
  assert.match(unfolded, /^List-Unsubscribe-Post: List-Unsubscribe=One-Click/mi);
  assert.ok(m.html!.includes(`href="${link}"`), 'the html carries the footer link');
  assert.ok(m.text!.includes(`Leave: ${link}`), 'the text placeholder is the link');
  assert.ok(!m.text!.includes('Unsubscribe: http'), 'no footer where the content has its own link');

  // Listed only by broadcast_id.
  const plain = (await (await ctx.call(key, '/v1/emails?limit=100')).json()) as { data: unknown[] };
  assert.equal(plain.data.length, 0);
  const ofBroadcast = (await (await ctx.call(key, `/v1/emails?limit=100&broadcast_id=${b.id}`)).json()) as { data: unknown[]; has_more: boolean };
  assert.equal(ofBroadcast.data.length, 100);
  assert.equal(ofBroadcast.has_more, true);
  const supp = (await (await ctx.call(key, `/v1/broadcasts/${b.id}/recipients?type=suppressed&limit=100`)).json()) as { data: { email: string }[] };
  assert.deepEqual(new Set(supp.data.map((r) => r.email)), new Set(suppressedEmails));
  // Events name the broadcast.
  const [ev] = await ctx.sql<[{ data: { broadcast_id?: string } }]>`select data from events where project_id = ${projectId} and type = 'email.sent' limit 1`;
  assert.equal(ev.data.broadcast_id, b.id);

  // One-click: the topic's opt_out at once, and the contact's other copies still queued would be canceled.
  const target = mail.find((x) => x.to === email(40))!;
  const url = /^List-Unsubscribe: <([^>]+)>/mi.exec(target.raw.replace(/\r\n[ \t]+/g, ' '))![1]!;
  const path = new URL(url).pathname;
  const page = await ctx.app.request(path);
  assert.equal(page.status, 200);
  const body = await page.text();
  assert.match(body, /<form method="post">/);
  assert.ok(!/<script/i.test(body), 'no script');
  const post = await ctx.app.request(path, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });
  assert.equal(post.status, 200);
  const [sub] = await ctx.sql<[{ subscription: string }?]>`select subscription from contact_topics where contact_id = ${contactIds[40]!} and topic_id = ${topicId}`;
  assert.equal(sub?.subscription, 'opt_out');
  const [contact] = await ctx.sql<[{ unsubscribed: boolean }]>`select unsubscribed from contacts where id = ${contactIds[40]!}`;
  assert.equal(contact.unsubscribed, false, 'a topic link leaves the topic only');
  const [topicEvent] = await ctx.sql<[{ data: { id: string; topics: { id: string; subscription: string }[] } }?]>`
    select data from events where project_id = ${projectId} and type = 'contact.topics.updated' and data->>'id' = ${contactIds[40]!}`;
  assert.ok(topicEvent, 'the one-click POST fires contact.topics.updated');
  assert.deepEqual(topicEvent.data.topics.find((t) => t.id === topicId)?.subscription, 'opt_out');
  const unsubCount = (await get(key, b.id)).counts.unsubscribed;
  assert.equal(unsubCount, 1);
  // A changed token is refused.
  const forged = await ctx.app.request(path.slice(0, -2) + 'xx', { method: 'POST', body: 'List-Unsubscribe=One-Click', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  assert.equal(forged.status, 400);
});

test('opt_out topic: only contacts who opted in; no topic: the whole segment but the unsubscribed, and its link leaves everything', { timeout: 120_000 }, async () => {
  const { projectId, key } = await ctx.tenant('bc-topics');
  const { segmentId, contactIds, email } = await seedSegment(ctx.sql, projectId, 20);
  const topicId = await seedTopic(ctx.sql, projectId, 'opt_out');
  for (const id of contactIds.slice(0, 5)) await setSubscription(ctx.sql, projectId, id, topicId, 'opt_in');
  const make = async (topic: string | null) => {
    const res = await ctx.call(key, '/v1/broadcasts', { method: 'POST', body: { segment_id: segmentId, topic_id: topic, from: 'a@example.test', subject: 's', html: '<p>x</p>' } });
    const { id } = (await res.json()) as { id: string };
    assert.equal((await ctx.call(key, `/v1/broadcasts/${id}/send`, { method: 'POST' })).status, 200);
    await waitFor('sent', async () => (await get(key, id)).status === 'sent', 60_000, 100);
    return id;
  };
  await make(topicId);
  let mail = await caughtMail(ctx.sql, projectId);
  assert.deepEqual(new Set(mail.map((m) => m.to)), new Set([0, 1, 2, 3, 4].map(email)));

  await ctx.sql`update contacts set unsubscribed = true where id = ${contactIds[19]!}`;
  await ctx.sql`delete from sink_messages where project_id = ${projectId}`;
  await make(null);
  mail = await caughtMail(ctx.sql, projectId);
  assert.equal(mail.length, 19);
  const link = /^List-Unsubscribe: <([^>]+)>/mi.exec(mail.find((m) => m.to === email(3))!.raw.replace(/\r\n[ \t]+/g, ' '))![1]!;
  const res = await ctx.app.request(new URL(link).pathname, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });
  assert.equal(res.status, 200);
  const [c] = await ctx.sql<[{ unsubscribed: boolean }]>`select unsubscribed from contacts where id = ${contactIds[3]!}`;
  assert.equal(c.unsubscribed, true);
  const [updated] = await ctx.sql<[{ data: { unsubscribed: boolean } }?]>`
    select data from events where project_id = ${projectId} and type = 'contact.updated' and data->>'id' = ${contactIds[3]!}`;
  assert.equal(updated?.data.unsubscribed, true, 'a link without a topic fires contact.updated');
});

test('a recipient whose personalised copy is over the message limit is counted and listed as failed, and the rest are sent', { timeout: 120_000 }, async () => {
  const { projectId, key } = await ctx.tenant('bc-too-large');
  const { segmentId, contactIds, email } = await seedSegment(ctx.sql, projectId, 3);
  // Each '&' is escaped to five bytes in html: a value of a fifth of the limit and a little more passes it.
  const big = '&'.repeat(Math.ceil(ctx.config.emailMaxMessageBytes / 5) + 1000);
  await ctx.sql`update contacts set properties = jsonb_build_object('bio', ${big}::text) where id = ${contactIds[1]!} and project_id = ${projectId}`;
  const created = await ctx.call(key, '/v1/broadcasts', { method: 'POST', body: { segment_id: segmentId, from: 'a@example.test', subject: 'Bio', html: '<p>{{{contact.bio|none}}}</p>' } });
  const { id } = (await created.json()) as { id: string };
  assert.equal((await ctx.call(key, `/v1/broadcasts/${id}/send`, { method: 'POST', body: {} })).status, 200);
  await waitFor('the broadcast to be sent', async () => (await get(key, id)).status === 'sent', 90_000, 200);
  const counts = (await get(key, id)).counts;
  assert.equal(counts.sent, 2);
  assert.equal(counts.failed, 1, 'the copy too large to send is a failure');
  assert.equal(counts.recipients, 3);
  const failed = (await (await ctx.call(key, `/v1/broadcasts/${id}/recipients?type=failed`)).json()) as { data: { email: string; email_id: string | null }[] };
  assert.deepEqual(failed.data.map((r) => [r.email, r.email_id]), [[email(1), null]]);
  assert.deepEqual(new Set((await caughtMail(ctx.sql, projectId)).map((m) => m.to)), new Set([email(0), email(2)]));
});
