import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { selfSignedCertificate, startHttpsReceiver } from '../helpers/https-receiver.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { fakeDns, receiverVerifies } from '../webhooks/helpers.ts';
import { createEndpoint } from '../../src/webhooks/service.ts';
import { recordContactEvent } from '../../src/contacts/events.ts';
import { receivesTopic } from '../../src/contacts/subscription.ts';
import { newId } from '../../src/platform/ids.ts';

// contact.* events reach endpoints that take them (signed, email_id null, the contact's state as
// data) and not endpoints filtering for other types.
const ctx = await createTestContext({ env: { WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_RETRY_BASE_MS: '20' } });
const tls = selfSignedCertificate();
const receiver = await startHttpsReceiver(tls);
receiver.respond((_req, res) => res.writeHead(204).end());
const dns = fakeDns({ 'hooks.test': ['127.0.0.1'] });
await startTestWorker(ctx.config, ctx.sql, { webhooks: { ca: tls.cert, resolve: dns.resolve, timeoutMs: 2000 } });
const t = await ctx.tenant();
const json = async <T = any>(res: Response, status: number): Promise<T> => {
  const body = await res.text();
  assert.equal(res.status, status, body);
  return (body ? JSON.parse(body) : undefined) as T;
};

type Body = { id: string; type: string; email_id: unknown; created_at: string; data: any };

test('create, update, a segment, topics and delete each deliver their event with the contact\'s state', { timeout: 90_000 }, async () => {
  const wanted = await createEndpoint(ctx.sql, ctx.config, t.projectId, receiver.url('/contacts', 'hooks.test'),
    { resolve: dns.resolve, eventTypes: ['contact.created', 'contact.updated', 'contact.deleted', 'contact.topics.updated'] });
  await createEndpoint(ctx.sql, ctx.config, t.projectId, receiver.url('/bounces', 'hooks.test'), { resolve: dns.resolve, eventTypes: ['email.bounced'] });
  await createEndpoint(ctx.sql, ctx.config, t.projectId, receiver.url('/deletes', 'hooks.test'), { resolve: dns.resolve, eventTypes: ['contact.deleted'] });

  const topicIn = await json(await ctx.call(t.key, '/v1/topics', { method: 'POST', body: { name: 'News', default_subscription: 'opt_in' } }), 201);
  const topicOut = await json(await ctx.call(t.key, '/v1/topics', { method: 'POST', body: { name: 'Offers', default_subscription: 'opt_out' } }), 201);
  const seg = await json(await ctx.call(t.key, '/v1/segments', { method: 'POST', body: { name: 'S' } }), 201);
  const c = await json(await ctx.call(t.key, '/v1/contacts', { method: 'POST', body: { email: 'Hook+1@example.com', first_name: 'Ann' } }), 201);
  await json(await ctx.call(t.key, '/v1/contacts/hook+1@example.com', { method: 'PATCH', body: { last_name: 'Lee', unsubscribed: true } }), 200);
  await json(await ctx.call(t.key, `/v1/contacts/${c.id}/segments/${seg.id}`, { method: 'POST' }), 200);
  await json(await ctx.call(t.key, `/v1/contacts/${c.id}/topics`, { method: 'PATCH', body: [{ id: topicOut.id, subscription: 'opt_in' }] }), 200);
  // The same choice again changes nothing and announces nothing.
  await json(await ctx.call(t.key, `/v1/contacts/${c.id}/topics`, { method: 'PATCH', body: [{ id: topicOut.id, subscription: 'opt_in' }] }), 200);
  assert.equal((await ctx.call(t.key, `/v1/contacts/${c.id}`, { method: 'DELETE' })).status, 204);

  const got = () => receiver.requests.filter((r) => r.path === '/contacts');
  await waitFor('five contact events', () => got().length >= 5, 60_000);
  await waitFor('the deleted event on the delete-only endpoint', () => receiver.requests.some((r) => r.path === '/deletes'), 30_000);
  const bodies = got().map((r) => JSON.parse(r.body.toString('utf8')) as Body).sort((x, y) => (x.id < y.id ? -1 : 1));
  assert.deepEqual(bodies.map((b) => b.type), ['contact.created', 'contact.updated', 'contact.updated', 'contact.topics.updated', 'contact.deleted']);
  for (const [i, b] of bodies.entries()) {
    assert.equal(b.email_id, null);
    const raw = got().find((r) => JSON.parse(r.body.toString('utf8')).id === b.id)!;
    assert.ok(receiverVerifies(wanted.secret, raw.headers, raw.body), `event ${i} signed`);
    assert.equal(b.data.id, c.id);
    assert.equal(b.data.email, 'Hook+1@example.com');
    assert.equal(b.data.created_at, c.created_at);
  }
  const defaults = [{ id: topicIn.id, subscription: 'opt_in' }, { id: topicOut.id, subscription: 'opt_out' }];
  assert.deepEqual(bodies[0]!.data, {
    id: c.id, email: 'Hook+1@example.com', first_name: 'Ann', last_name: null, unsubscribed: false, segment_ids: [], topics: defaults, created_at: c.created_at,
  });
  assert.deepEqual([bodies[1]!.data.last_name, bodies[1]!.data.unsubscribed, bodies[1]!.data.segment_ids], ['Lee', true, []]);
  assert.deepEqual(bodies[2]!.data.segment_ids, [seg.id]);
  const chosen = [{ id: topicIn.id, subscription: 'opt_in' }, { id: topicOut.id, subscription: 'opt_in' }];
  assert.deepEqual(bodies[3]!.data.topics, chosen);
  assert.deepEqual(bodies[4]!.data, { ...bodies[3]!.data }, 'deleted carries the last state');
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(receiver.requests.filter((r) => r.path === '/bounces').length, 0, 'filtered out');
  assert.equal(receiver.requests.filter((r) => r.path === '/deletes').length, 1);
});

test('recordContactEvent is callable from another feature\'s transaction; receivesTopic applies the rule', async () => {
  const topicIn = await json(await ctx.call(t.key, '/v1/topics', { method: 'POST', body: { name: 'In', default_subscription: 'opt_in' } }), 201);
  const topicOut = await json(await ctx.call(t.key, '/v1/topics', { method: 'POST', body: { name: 'Out', default_subscription: 'opt_out' } }), 201);
  const quiet = await json(await ctx.call(t.key, '/v1/contacts', { method: 'POST', body: { email: 'quiet@example.com' } }), 201);
  const keen = await json(await ctx.call(t.key, '/v1/contacts', {
    method: 'POST', body: { email: 'keen@example.com', topics: [{ id: topicIn.id, subscription: 'opt_out' }, { id: topicOut.id, subscription: 'opt_in' }] },
  }), 201);
  const who = async (topic: { id: string; default_subscription: 'opt_in' | 'opt_out' }) => (await ctx.sql<{ email: string }[]>`
    select email from contacts c where project_id = ${t.projectId} and email in ('quiet@example.com', 'keen@example.com')
      and ${receivesTopic(ctx.sql, { id: topic.id, defaultSubscription: topic.default_subscription }, 'c.id')} order by email`).map((r) => r.email);
  assert.deepEqual(await who(topicIn), ['quiet@example.com'], 'opt_in: all but those who opted out');
  assert.deepEqual(await who(topicOut), ['keen@example.com'], 'opt_out: only those who opted in');

  const recorded = await ctx.sql.begin((tx) => recordContactEvent(tx, t.projectId, quiet.id, 'contact.updated'));
  assert.equal(recorded, true);
  assert.equal(await ctx.sql.begin((tx) => recordContactEvent(tx, t.projectId, newId('contact'), 'contact.updated')), false);
  const [event] = await ctx.sql<{ data: any }[]>`select data from events where project_id = ${t.projectId} and type = 'contact.updated' and data->>'id' = ${quiet.id}`;
  assert.equal(event!.data.email, 'quiet@example.com');
});
