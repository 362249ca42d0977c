import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { createApiKey } from '../../src/keys/service.ts';

// Tenancy and permissions: another project's contacts, segments and topics are not found, and a
// sending key reaches none of these routes.
const ctx = await createTestContext();
const a = await ctx.tenant('a');
const b = await ctx.tenant('b');
const json = async <T = any>(res: Response, status: number): Promise<T> => {
  const body = await res.text();
  assert.equal(res.status, status, body);
  return (body ? JSON.parse(body) : undefined) as T;
};

const contact = await json(await ctx.call(a.key, '/v1/contacts', { method: 'POST', body: { email: 'shared@example.com' } }), 201);
const seg = await json(await ctx.call(a.key, '/v1/segments', { method: 'POST', body: { name: 'A' } }), 201);
const topic = await json(await ctx.call(a.key, '/v1/topics', { method: 'POST', body: { name: 'A', default_subscription: 'opt_in' } }), 201);
const prop = await json(await ctx.call(a.key, '/v1/contact-properties', { method: 'POST', body: { key: 'plan', type: 'string' } }), 201);

test('another project\'s contact, by id or by email, is 404 and untouched', async () => {
  for (const [method, path] of [
    ['GET', `/v1/contacts/${contact.id}`], ['GET', '/v1/contacts/shared@example.com'], ['PATCH', `/v1/contacts/${contact.id}`],
    ['DELETE', '/v1/contacts/shared@example.com'], ['GET', `/v1/contacts/${contact.id}/topics`], ['GET', `/v1/contacts/${contact.id}/segments`],
    ['GET', `/v1/segments/${seg.id}`], ['DELETE', `/v1/segments/${seg.id}`], ['GET', `/v1/segments/${seg.id}/contacts`], ['GET', `/v1/contacts?segment_id=${seg.id}`],
    ['PATCH', `/v1/topics/${topic.id}`], ['DELETE', `/v1/topics/${topic.id}`], ['GET', `/v1/contact-properties/${prop.id}`], ['DELETE', `/v1/contact-properties/${prop.id}`],
  ] as const) {
    const res = await ctx.call(b.key, path, { method, body: method === 'PATCH' ? { first_name: 'Mallory', name: 'x' } : undefined });
    assert.equal((await json(res, 404)).error.type, 'not_found', `${method} ${path}`);
  }
  assert.deepEqual((await json(await ctx.call(b.key, '/v1/contacts?email=shared@example.com'), 200)).data, []);
  assert.deepEqual((await json(await ctx.call(b.key, '/v1/contacts'), 200)).data, []);
  assert.equal((await json(await ctx.call(a.key, `/v1/contacts/${contact.id}`), 200)).first_name, null);
});

test('another project\'s segment or topic cannot be joined, and its property cannot be set', async () => {
  const own = await json(await ctx.call(b.key, '/v1/contacts', { method: 'POST', body: { email: 'shared@example.com' } }), 201);
  assert.notEqual(own.id, contact.id, 'one address may be a contact in each project');
  await json(await ctx.call(b.key, `/v1/contacts/${own.id}/segments/${seg.id}`, { method: 'POST' }), 404);
  await json(await ctx.call(b.key, `/v1/contacts/${own.id}/topics`, { method: 'PATCH', body: [{ id: topic.id, subscription: 'opt_out' }] }), 422);
  await json(await ctx.call(b.key, `/v1/contacts/${own.id}`, { method: 'PATCH', body: { properties: { plan: 'x' } } }), 422);
  await json(await ctx.call(b.key, '/v1/contacts', { method: 'POST', body: { email: 'z@example.com', segment_ids: [seg.id] } }), 422);
  const [{ n }] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from contact_segments where segment_id = ${seg.id}`;
  assert.equal(n, 0);
});

test('a sending key gets 403 permission_denied on every contact route, /v1 and /resend', async () => {
  const sending = await createApiKey(ctx.sql, a.projectId, 'sender', 'sending');
  for (const [method, path] of [
    ['POST', '/v1/contacts'], ['GET', '/v1/contacts'], ['GET', `/v1/contacts/${contact.id}`], ['DELETE', `/v1/contacts/${contact.id}`],
    ['PATCH', `/v1/contacts/${contact.id}/topics`], ['GET', '/v1/segments'], ['POST', '/v1/topics'], ['GET', '/v1/contact-properties'],
  ] as const) {
    const res = await ctx.call(sending.key, path, { method, body: method === 'GET' || method === 'DELETE' ? undefined : {} });
    assert.equal((await json(res, 403)).error.type, 'permission_denied', `${method} ${path}`);
  }
  const resend = await json(await ctx.call(sending.key, '/resend/contacts'), 401);
  assert.equal(resend.name, 'restricted_api_key');
  assert.equal((await json(await ctx.call(a.key, `/v1/contacts/${contact.id}`), 200)).id, contact.id, 'still there');
});
