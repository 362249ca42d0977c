import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Resend } from 'resend';
import { createTestContext } from '../helpers/app.ts';
import { createApiKey } from '../../src/keys/service.ts';

// The official SDK against /resend for contacts, their segments and topics, contact properties,
// segments, audiences and topics: each call answered in the shape the SDK's types declare.
const ctx = await createTestContext();
const server = serve({ fetch: ctx.app.fetch, hostname: '127.0.0.1', port: 0 });
await new Promise((r) => server.once('listening', r));
after(() => new Promise((r) => server.close(r)));
process.env.RESEND_BASE_URL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/resend`;

const tenant = await ctx.tenant();
const resend = new Resend(tenant.key);
const other = new Resend((await ctx.tenant('other')).key);

/** The data of a call that must succeed. */
function ok<T>(r: { data: T | null; error: unknown }): T {
  assert.equal(r.error, null, JSON.stringify(r.error));
  return r.data!;
}
const iso = (s: string) => assert.ok(!Number.isNaN(Date.parse(s)) && s.endsWith('Z'), s);

test('contactProperties: create, list, get, update, remove', async () => {
  const created = ok(await resend.contactProperties.create({ key: 'plan', type: 'string', fallbackValue: 'free' }));
  assert.equal(created.object, 'contact_property');
  assert.match(created.id, /^cprop_/);
  const got = ok(await resend.contactProperties.get(created.id));
  assert.deepEqual({ ...got, createdAt: undefined }, { object: 'contact_property', id: created.id, key: 'plan', type: 'string', fallbackValue: 'free', createdAt: undefined });
  iso(got.createdAt);
  const list = ok(await resend.contactProperties.list());
  assert.equal(list.object, 'list');
  assert.equal(list.has_more, false);
  assert.deepEqual(list.data.map((p) => [p.id, p.key, p.type]), [[created.id, 'plan', 'string']]);
  const updated = ok(await resend.contactProperties.update({ id: created.id, fallbackValue: 'basic' }));
  assert.deepEqual(updated, { object: 'contact_property', id: created.id });
  assert.equal(ok(await resend.contactProperties.get(created.id)).fallbackValue, 'basic');
  const extra = ok(await resend.contactProperties.create({ key: 'gone', type: 'number' }));
  assert.deepEqual(ok(await resend.contactProperties.remove(extra.id)), { object: 'contact_property', id: extra.id, deleted: true });
  assert.equal((await resend.contactProperties.get(extra.id)).error?.name, 'not_found');
});

test('segments and audiences: the same objects', async () => {
  const seg = ok(await resend.segments.create({ name: 'Customers' }));
  assert.equal(seg.object, 'segment');
  assert.equal(seg.name, 'Customers');
  const aud = ok(await resend.audiences.create({ name: 'Legacy' }));
  const got = ok(await resend.segments.get(aud.id));
  assert.deepEqual({ ...got, created_at: undefined }, { object: 'segment', id: aud.id, name: 'Legacy', created_at: undefined });
  iso(got.created_at);
  const list = ok(await resend.audiences.list({ limit: 1 }));
  assert.equal(list.object, 'list');
  assert.equal(list.has_more, true);
  assert.deepEqual(list.data.map((s) => s.id), [aud.id]);
  assert.deepEqual(ok(await resend.segments.list({ after: aud.id })).data.map((s) => s.id), [seg.id]);
  assert.deepEqual(ok(await resend.segments.update(seg.id, { name: 'Buyers' })), { object: 'segment', id: seg.id });
  assert.equal(ok(await resend.audiences.get(seg.id)).name, 'Buyers');
  assert.deepEqual(ok(await resend.audiences.remove(aud.id)), { object: 'segment', id: aud.id, deleted: true });
  assert.equal((await resend.segments.get(aud.id)).error?.statusCode, 404);
});

test('topics: create, unpaginated list, get, update with the echoed id, remove', async () => {
  const created = ok(await resend.topics.create({ name: 'News', description: 'Monthly', defaultSubscription: 'opt_in' }));
  assert.match(created.id, /^topic_/);
  const second = ok(await resend.topics.create({ name: 'Offers', defaultSubscription: 'opt_out' }));
  const list = ok(await resend.topics.list());
  assert.deepEqual(Object.keys(list), ['data']);
  assert.deepEqual(list.data.map((t) => [t.id, t.name, t.default_subscription]), [[created.id, 'News', 'opt_in'], [second.id, 'Offers', 'opt_out']]);
  const got = ok(await resend.topics.get(created.id));
  assert.equal(got.description, 'Monthly');
  iso(got.created_at);
  assert.deepEqual(ok(await resend.topics.update({ id: created.id, name: 'Newsletter' })), { id: created.id });
  assert.equal(ok(await resend.topics.get(created.id)).name, 'Newsletter');
  const third = ok(await resend.topics.create({ name: 'Temp', defaultSubscription: 'opt_in' }));
  assert.deepEqual(ok(await resend.topics.remove(third.id)), { object: 'topic', id: third.id, deleted: true });
});

test('contacts: create with segments and topics, list, get by id and by email with +, update, remove', async () => {
  const seg = ok(await resend.segments.create({ name: 'VIP' }));
  const topics = ok(await resend.topics.list()).data;
  const created = ok(await resend.contacts.create({
    email: 'ann+vip@example.com', firstName: 'Ann', lastName: 'Lee', properties: { plan: 'pro' },
    segments: [{ id: seg.id }], topics: [{ id: topics[0]!.id, subscription: 'opt_out' }],
  }));
  assert.equal(created.object, 'contact');
  assert.match(created.id, /^contact_/);
  const again = await resend.contacts.create({ email: 'ANN+vip@example.com' });
  assert.equal(again.data, null);
  assert.ok(again.error?.message.includes(created.id), 'the duplicate names the existing id');

  const byEmail = ok(await resend.contacts.get({ email: 'ann+vip@example.com' }));
  assert.deepEqual({ ...byEmail, created_at: undefined }, {
    object: 'contact', id: created.id, email: 'ann+vip@example.com', first_name: 'Ann', last_name: 'Lee', unsubscribed: false,
    properties: { plan: { type: 'string', value: 'pro' } }, created_at: undefined,
  });
  iso(byEmail.created_at);
  assert.equal(ok(await resend.contacts.get(created.id)).email, 'ann+vip@example.com');

  const second = ok(await resend.contacts.create({ email: 'bob@example.com' }));
  const list = ok(await resend.contacts.list({ limit: 1 }));
  assert.equal(list.object, 'list');
  assert.equal(list.has_more, true);
  assert.deepEqual(list.data.map((c) => c.id), [second.id]);
  assert.deepEqual(Object.keys(list.data[0]!).sort(), ['created_at', 'email', 'first_name', 'id', 'last_name', 'unsubscribed']);
  assert.deepEqual(ok(await resend.contacts.list({ after: second.id })).data.map((c) => c.id), [created.id]);
  assert.deepEqual(ok(await resend.contacts.list({ before: created.id })).data.map((c) => c.id), [second.id]);
  assert.deepEqual(ok(await resend.contacts.list({ segmentId: seg.id })).data.map((c) => c.id), [created.id]);
  assert.deepEqual(ok(await resend.contacts.list({ audienceId: seg.id })).data.map((c) => c.id), [created.id]);

  assert.deepEqual(ok(await resend.contacts.update({ email: 'ann+vip@example.com', unsubscribed: true, properties: { plan: null } })), { object: 'contact', id: created.id });
  const after = ok(await resend.contacts.get({ id: created.id }));
  assert.equal(after.unsubscribed, true);
  assert.deepEqual(after.properties, {});
  const wrong = await resend.contacts.update({ id: created.id, properties: { undeclared: 'x' } });
  assert.equal(wrong.error?.name, 'validation_error');
  assert.ok(wrong.error?.message.includes('undeclared'));

  assert.deepEqual(ok(await resend.contacts.remove({ email: 'bob@example.com' })), { object: 'contact', contact: second.id, deleted: true });
  assert.equal((await resend.contacts.get(second.id)).error?.name, 'not_found');
});

test('legacy audience paths: create, get, update and remove within the audience', async () => {
  const aud = ok(await resend.audiences.create({ name: 'Old list' }));
  const created = ok(await resend.contacts.create({ audienceId: aud.id, email: 'old@example.com', firstName: 'Old' }));
  assert.equal(created.object, 'contact');
  assert.deepEqual(ok(await resend.contacts.list({ audienceId: aud.id })).data.map((c) => c.id), [created.id]);
  assert.equal(ok(await resend.contacts.get({ audienceId: aud.id, email: 'old@example.com' })).first_name, 'Old');
  assert.deepEqual(ok(await resend.contacts.update({ audienceId: aud.id, id: created.id, firstName: 'New' })), { object: 'contact', id: created.id });
  assert.deepEqual(ok(await resend.contacts.remove({ audienceId: aud.id, email: 'old@example.com' })), { object: 'contact', contact: created.id, deleted: true });
  assert.equal((await resend.contacts.create({ audienceId: 'seg_01ARZ3NDEKTSV4RRFFQ69G5FAV', email: 'x@example.com' })).error?.name, 'not_found');
});

test('contacts.segments and contacts.topics, by id and by email', async () => {
  const c = ok(await resend.contacts.create({ email: 'seg+topics@example.com' }));
  const seg = ok(await resend.segments.create({ name: 'Members' }));
  assert.deepEqual(ok(await resend.contacts.segments.add({ email: 'seg+topics@example.com', segmentId: seg.id })), { id: seg.id });
  const segs = ok(await resend.contacts.segments.list({ contactId: c.id }));
  assert.equal(segs.object, 'list');
  assert.deepEqual(segs.data.map((s) => [s.id, s.name]), [[seg.id, 'Members']]);
  iso(segs.data[0]!.created_at);
  const removed = ok(await resend.contacts.segments.remove({ contactId: c.id, segmentId: seg.id }));
  assert.equal(removed.id, seg.id);
  assert.equal(removed.deleted, true);
  assert.deepEqual(ok(await resend.contacts.segments.list({ email: 'seg+topics@example.com' })).data, []);

  const [news, offers] = ok(await resend.topics.list()).data;
  const before = ok(await resend.contacts.topics.list({ email: 'seg+topics@example.com' }));
  assert.equal(before.object, 'list');
  assert.deepEqual(Object.fromEntries(before.data.map((t) => [t.id, t.subscription])), { [news!.id]: 'opt_in', [offers!.id]: 'opt_out' });
  assert.deepEqual(Object.keys(before.data[0]!).sort(), ['description', 'id', 'name', 'subscription']);
  assert.deepEqual(ok(await resend.contacts.topics.update({ id: c.id, topics: [{ id: offers!.id, subscription: 'opt_in' }, { id: news!.id, subscription: 'opt_out' }] })), { id: c.id });
  const later = ok(await resend.contacts.topics.list({ id: c.id }));
  assert.deepEqual(Object.fromEntries(later.data.map((t) => [t.id, t.subscription])), { [news!.id]: 'opt_out', [offers!.id]: 'opt_in' });
});

test('errors in Resend\'s shape, and another project sees nothing', async () => {
  const missing = await resend.contacts.get({ email: 'nobody@example.com' });
  assert.deepEqual(missing.error, { statusCode: 404, name: 'not_found', message: 'Contact not found.' });
  const bad = await resend.topics.create({ name: 'x'.repeat(51), defaultSubscription: 'opt_in' });
  assert.equal(bad.error?.name, 'validation_error');
  assert.equal(bad.error?.statusCode, 422);
  const mine = ok(await resend.contacts.create({ email: 'private@example.com' }));
  assert.equal((await other.contacts.get(mine.id)).error?.name, 'not_found');
  assert.equal((await other.contacts.get({ email: 'private@example.com' })).error?.name, 'not_found');
  assert.deepEqual(ok(await other.contacts.list()).data, []);
  assert.deepEqual(ok(await other.topics.list()).data, []);
  const sending = new Resend((await createApiKey(ctx.sql, tenant.projectId, 'sender', 'sending')).key);
  assert.equal((await sending.contacts.list()).error?.name, 'restricted_api_key');
});
