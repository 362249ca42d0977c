import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';

// The /v1 contacts, contact properties, segments and topics routes: the happy path.
const ctx = await createTestContext();
const t = await ctx.tenant();
const call = (path: string, init?: Parameters<typeof ctx.call>[2]) => ctx.call(t.key, path, init);
const json = async <T = any>(res: Response, status: number): Promise<T> => {
  const body = await res.text();
  assert.equal(res.status, status, body);
  return (body ? JSON.parse(body) : undefined) as T;
};

test('a contact is created, read by id and by email (raw and percent-encoded, any case), updated and deleted', async () => {
  await json(await call('/v1/contact-properties', { method: 'POST', body: { key: 'plan', type: 'string', fallback_value: 'free' } }), 201);
  await json(await call('/v1/contact-properties', { method: 'POST', body: { key: 'seats', type: 'number' } }), 201);
  const created = await json(await call('/v1/contacts', {
    method: 'POST', body: { email: 'Ann+News@Example.com', first_name: 'Ann', properties: { plan: 'pro', seats: 3 } },
  }), 201);
  assert.match(created.id, /^contact_[0-9A-Z]{26}$/);
  assert.deepEqual({ ...created, id: undefined, created_at: undefined, updated_at: undefined }, {
    object: 'contact', id: undefined, email: 'Ann+News@Example.com', first_name: 'Ann', last_name: null, unsubscribed: false,
    properties: { plan: 'pro', seats: 3 }, segment_ids: [], created_at: undefined, updated_at: undefined,
  });
  for (const path of [created.id, 'Ann+News@Example.com', 'ann+news@example.com', encodeURIComponent('ann+news@example.com')]) {
    const got = await json(await call(`/v1/contacts/${path}`), 200);
    assert.equal(got.id, created.id, path);
  }
  const updated = await json(await call('/v1/contacts/ann+news@example.com', {
    method: 'PATCH', body: { last_name: 'Lee', unsubscribed: true, properties: { seats: null, plan: 'team' } },
  }), 200);
  assert.equal(updated.last_name, 'Lee');
  assert.equal(updated.first_name, 'Ann', 'fields left out keep their value');
  assert.equal(updated.unsubscribed, true);
  assert.deepEqual(updated.properties, { plan: 'team' }, 'null clears a property');

  const res = await call(`/v1/contacts/${encodeURIComponent('ANN+news@example.com')}`, { method: 'DELETE' });
  assert.equal(res.status, 204);
  await json(await call(`/v1/contacts/${created.id}`), 404);
});

test('lists page newest first and filter by email and by segment; a segment lists its members', async () => {
  const seg = await json(await call('/v1/segments', { method: 'POST', body: { name: 'Customers' } }), 201);
  assert.match(seg.id, /^seg_/);
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const c = await json(await call('/v1/contacts', { method: 'POST', body: { email: `list${i}@example.com`, segment_ids: i % 2 === 0 ? [seg.id] : [] } }), 201);
    ids.push(c.id);
  }
  const first = await json(await call('/v1/contacts?limit=2'), 200);
  assert.deepEqual(first.data.map((c: any) => c.id), [ids[4], ids[3]]);
  assert.equal(first.has_more, true);
  const next = await json(await call(`/v1/contacts?limit=2&starting_after=${ids[3]}`), 200);
  assert.deepEqual(next.data.map((c: any) => c.id), [ids[2], ids[1]]);

  const byEmail = await json(await call('/v1/contacts?email=LIST3@example.com'), 200);
  assert.deepEqual(byEmail.data.map((c: any) => c.id), [ids[3]]);
  const inSegment = await json(await call(`/v1/contacts?segment_id=${seg.id}`), 200);
  assert.deepEqual(inSegment.data.map((c: any) => c.id), [ids[4], ids[2], ids[0]]);
  assert.deepEqual(inSegment.data[0].segment_ids, [seg.id]);
  const members = await json(await call(`/v1/segments/${seg.id}/contacts?limit=2`), 200);
  assert.deepEqual(members.data.map((c: any) => c.id), [ids[4], ids[2]]);
  assert.equal(members.has_more, true);

  // Membership by path: add, list, remove.
  await json(await call(`/v1/contacts/list1@example.com/segments/${seg.id}`, { method: 'POST' }), 200);
  const segs = await json(await call('/v1/contacts/list1@example.com/segments'), 200);
  assert.deepEqual(segs.data.map((s: any) => [s.id, s.name]), [[seg.id, 'Customers']]);
  const removed = await json(await call(`/v1/contacts/list1@example.com/segments/${seg.id}`, { method: 'DELETE' }), 200);
  assert.equal(removed.deleted, true);
  assert.deepEqual((await json(await call('/v1/contacts/list1@example.com/segments'), 200)).data, []);

  const renamed = await json(await call(`/v1/segments/${seg.id}`, { method: 'PATCH', body: { name: 'Buyers' } }), 200);
  assert.equal(renamed.name, 'Buyers');
  assert.equal((await call(`/v1/segments/${seg.id}`, { method: 'DELETE' })).status, 204);
  assert.deepEqual((await json(await call(`/v1/contacts/${ids[0]}`), 200)).segment_ids, [], 'the contact stays, out of the deleted segment');
});

test('topics: the effective subscription follows the rule, and PATCH takes a bare array', async () => {
  const optIn = await json(await call('/v1/topics', { method: 'POST', body: { name: 'Product news', description: 'Monthly', default_subscription: 'opt_in', visibility: 'public' } }), 201);
  const optOut = await json(await call('/v1/topics', { method: 'POST', body: { name: 'Offers', default_subscription: 'opt_out' } }), 201);
  assert.equal(optOut.visibility, 'private', 'private by default');
  const c = await json(await call('/v1/contacts', { method: 'POST', body: { email: 'topics@example.com' } }), 201);
  const subs = async () => Object.fromEntries((await json(await call(`/v1/contacts/${c.id}/topics`), 200)).data.map((x: any) => [x.id, x.subscription]));
  assert.deepEqual(await subs(), { [optIn.id]: 'opt_in', [optOut.id]: 'opt_out' }, 'no choice: each topic\'s default');

  const patched = await json(await call('/v1/contacts/topics@example.com/topics', {
    method: 'PATCH', body: [{ id: optIn.id, subscription: 'opt_out' }, { id: optOut.id, subscription: 'opt_in' }],
  }), 200);
  assert.equal(patched.data.length, 2);
  assert.deepEqual(await subs(), { [optIn.id]: 'opt_out', [optOut.id]: 'opt_in' });

  // default_subscription is fixed at creation: the field is refused rather than silently ignored.
  const refused = await json(await call(`/v1/topics/${optIn.id}`, { method: 'PATCH', body: { name: 'News', default_subscription: 'opt_out' } }), 422);
  assert.deepEqual(refused.detail[0].loc, ['body', 'default_subscription']);
  const renamed = await json(await call(`/v1/topics/${optIn.id}`, { method: 'PATCH', body: { id: optIn.id, name: 'News', visibility: 'private' } }), 200);
  assert.deepEqual([renamed.name, renamed.visibility, renamed.default_subscription, renamed.description], ['News', 'private', 'opt_in', 'Monthly']);
  const list = await json(await call('/v1/topics'), 200);
  assert.deepEqual(list.data.map((x: any) => x.id), [optOut.id, optIn.id]);
  assert.equal((await call(`/v1/topics/${optOut.id}`, { method: 'DELETE' })).status, 204);
  assert.deepEqual(Object.keys(await subs()), [optIn.id]);
});

test('contact properties: list, get, update fallback, delete removes the values', async () => {
  const p = await json(await call('/v1/contact-properties', { method: 'POST', body: { key: 'city', type: 'string' } }), 201);
  assert.deepEqual({ ...p, id: undefined, created_at: undefined }, { object: 'contact_property', id: undefined, key: 'city', type: 'string', fallback_value: null, created_at: undefined });
  const c = await json(await call('/v1/contacts', { method: 'POST', body: { email: 'props@example.com', properties: { city: 'Oslo' } } }), 201);
  assert.equal((await json(await call(`/v1/contact-properties/${p.id}`, { method: 'PATCH', body: { fallback_value: 'somewhere' } }), 200)).fallback_value, 'somewhere');
  assert.equal((await json(await call(`/v1/contact-properties/${p.id}`), 200)).fallback_value, 'somewhere');
  assert.ok((await json(await call('/v1/contact-properties'), 200)).data.some((x: any) => x.id === p.id));
  assert.equal((await call(`/v1/contact-properties/${p.id}`, { method: 'DELETE' })).status, 204);
  assert.deepEqual((await json(await call(`/v1/contacts/${c.id}`), 200)).properties, {});
});

test('every change is in the audit log under its action', async () => {
  const rows = await ctx.sql<{ action: string }[]>`select distinct action from audit_log where project_id = ${t.projectId}`;
  const actions = new Set(rows.map((r) => r.action));
  for (const a of ['contact.created', 'contact.updated', 'contact.deleted', 'contact.segment_added', 'contact.segment_removed', 'contact.topics_updated',
    'contact_property.created', 'contact_property.updated', 'contact_property.deleted', 'segment.created', 'segment.updated', 'segment.deleted',
    'topic.created', 'topic.updated', 'topic.deleted']) assert.ok(actions.has(a), a);
  const res = await json(await call('/v1/audit-log?action=contact.created&limit=1'), 200);
  assert.equal(res.data[0].target.type, 'contact');
});
