import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';

// What the /v1 contact routes refuse, and how.
const ctx = await createTestContext();
const t = await ctx.tenant();
const call = (path: string, init?: Parameters<typeof ctx.call>[2]) => ctx.call(t.key, path, init);
const json = async <T = any>(res: Response, status: number): Promise<T> => {
  const body = await res.text();
  assert.equal(res.status, status, body);
  return JSON.parse(body) as T;
};

await json(await call('/v1/contact-properties', { method: 'POST', body: { key: 'plan', type: 'string' } }), 201);
await json(await call('/v1/contact-properties', { method: 'POST', body: { key: 'seats', type: 'number' } }), 201);

test('a second create of an address, in any case, answers 409 contact_exists naming the existing id', async () => {
  const first = await json(await call('/v1/contacts', { method: 'POST', body: { email: 'dup+1@example.com' } }), 201);
  const again = await json(await call('/v1/contacts', { method: 'POST', body: { email: 'DUP+1@Example.COM', first_name: 'X' } }), 409);
  assert.equal(again.error.type, 'contact_exists');
  assert.equal(again.error.contact_id, first.id);
  assert.ok(again.error.message.includes(first.id));
  const [{ n }] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from contacts where project_id = ${t.projectId} and lower(email) = 'dup+1@example.com'`;
  assert.equal(n, 1);
  const [{ events }] = await ctx.sql<[{ events: number }]>`select count(*)::int as events from events where project_id = ${t.projectId} and type = 'contact.created' and data->>'email' ilike 'dup+1@example.com'`;
  assert.equal(events, 1, 'the refused create recorded nothing');
});

test('a property not declared, or of the wrong type, answers 422 naming the key', async () => {
  const undeclared = await json(await call('/v1/contacts', { method: 'POST', body: { email: 'p@example.com', properties: { plan: 'pro', colour: 'red' } } }), 422);
  assert.deepEqual(undeclared.detail.map((d: any) => [d.loc, d.type]), [[['body', 'properties', 'colour'], 'undeclared_property']]);
  const wrongType = await json(await call('/v1/contacts', { method: 'POST', body: { email: 'p@example.com', properties: { seats: 'three', plan: 4 } } }), 422);
  assert.deepEqual(wrongType.detail.map((d: any) => d.loc).sort(), [['body', 'properties', 'plan'], ['body', 'properties', 'seats']]);
  const badKey = await json(await call('/v1/contacts', { method: 'POST', body: { email: 'p@example.com', properties: { 'bad-key': 1 } } }), 422);
  assert.deepEqual(badKey.detail[0].loc.slice(0, 2), ['body', 'properties']);
  const boolean = await json(await call('/v1/contacts', { method: 'POST', body: { email: 'p@example.com', properties: { plan: true } } }), 422);
  assert.deepEqual(boolean.detail[0].loc.slice(0, 3), ['body', 'properties', 'plan']);
  await json(await call('/v1/contacts', { method: 'POST', body: { email: 'p@example.com' } }), 201);
  const update = await json(await call('/v1/contacts/p@example.com', { method: 'PATCH', body: { properties: { seats: 'x' } } }), 422);
  assert.deepEqual(update.detail[0].loc, ['body', 'properties', 'seats']);
});

test('malformed ids and unknown contacts are 404; bad bodies are 422', async () => {
  for (const path of ['/v1/contacts/nope', '/v1/contacts/contact_123', '/v1/contacts/nobody@example.com', '/v1/contacts/contact_01ARZ3NDEKTSV4RRFFQ69G5FAV',
    '/v1/segments/seg_x', '/v1/topics/topic_x', '/v1/contact-properties/cprop_x', '/v1/contacts/p@example.com/segments/seg_x']) {
    const res = await call(path, path.endsWith('seg_x') && path.includes('/contacts/') ? { method: 'POST' } : undefined);
    assert.equal((await json(res, 404)).error.type, 'not_found', path);
  }
  assert.equal((await json(await call('/v1/contacts?segment_id=seg_x'), 404)).error.type, 'not_found');
  assert.equal((await json(await call('/v1/contacts?starting_after=contact_x'), 404)).error.type, 'not_found');
  // A NUL in the address filter (route-fuzz found it answering 500).
  assert.deepEqual((await json(await call('/v1/contacts?email=%00'), 422)).detail[0].loc, ['query', 'email']);
  await json(await call('/v1/contacts', { method: 'POST', body: { email: 'Ann <ann@example.com>' } }), 422);
  await json(await call('/v1/contacts', { method: 'POST', body: { email: 'not-an-address' } }), 422);
  await json(await call('/v1/contacts', { method: 'POST', body: '{"email":' }), 422);
  const segs = await json(await call('/v1/contacts', { method: 'POST', body: { email: 's@example.com', segment_ids: ['seg_01ARZ3NDEKTSV4RRFFQ69G5FAV'] } }), 422);
  assert.equal(segs.detail[0].type, 'unknown_segment');
  const topics = await json(await call('/v1/contacts/p@example.com/topics', { method: 'PATCH', body: [{ id: 'topic_01ARZ3NDEKTSV4RRFFQ69G5FAV', subscription: 'opt_in' }] }), 422);
  assert.deepEqual(topics.detail[0].loc, ['body', 0, 'id']);
  await json(await call('/v1/contacts/p@example.com/topics', { method: 'PATCH', body: { id: 'x', subscription: 'opt_in' } }), 422);
  await json(await call('/v1/topics', { method: 'POST', body: { name: 'x'.repeat(51), default_subscription: 'opt_in' } }), 422);
  await json(await call('/v1/topics', { method: 'POST', body: { name: 'ok', description: 'd'.repeat(201), default_subscription: 'opt_in' } }), 422);
  await json(await call('/v1/topics', { method: 'POST', body: { name: 'ok' } }), 422);
  const dupKey = await json(await call('/v1/contact-properties', { method: 'POST', body: { key: 'plan', type: 'number' } }), 409);
  assert.equal(dupKey.error.type, 'contact_property_exists');
  await json(await call('/v1/contact-properties', { method: 'POST', body: { key: 'n', type: 'number', fallback_value: 'x' } }), 422);
  const seg = await json(await call('/v1/segments', { method: 'POST', body: { name: 'S' } }), 201);
  assert.equal((await json(await call(`/v1/contacts/p@example.com/segments/${seg.id}`, { method: 'DELETE' }), 404)).error.type, 'not_found', 'not a member');
});

test('concurrent creates of one address make one contact; every other answer is 409 naming it', async () => {
  const answers = await Promise.all(Array.from({ length: 6 }, (_, i) =>
    call('/v1/contacts', { method: 'POST', body: { email: i % 2 ? 'race@example.com' : 'RACE@example.com' } })));
  const statuses = answers.map((r) => r.status).sort();
  assert.deepEqual(statuses, [201, 409, 409, 409, 409, 409]);
  const bodies = await Promise.all(answers.map((r) => r.json() as Promise<any>));
  const id = bodies.find((b) => b.id)!.id;
  for (const b of bodies.filter((x) => x.error)) assert.equal(b.error.contact_id, id);
});
