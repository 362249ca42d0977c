import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { createTestContext, TEST_SECRET_KEY } from '../helpers/app.ts';
import { selfSignedCertificate, startHttpsReceiver } from '../helpers/https-receiver.ts';
import { waitFor } from '../helpers/wait.ts';
import { createEndpoint } from '../../src/webhooks/service.ts';
import { deliverJob, flushJob, FLUSH_KEY_PREFIX } from '../../src/webhooks/queries.ts';
import { deliveriesFor, emitEvent, receiverVerifies, unqueuedDelivery, webhookWorker } from './helpers.ts';

const worker = webhookWorker();
const ctx = await createTestContext({ env: { WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_RETRY_BASE_MS: '20' } });
const tls = selfSignedCertificate();
const receiver = await startHttpsReceiver(tls);
receiver.respond((req, res) => {
  if (req.path === '/reject') res.writeHead(400, { 'content-type': 'text/plain' }).end('no thanks');
  else res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
});
await worker.start(ctx.config, ctx.sql, { ca: tls.cert });

const ROOT = path.resolve(import.meta.dirname, '../..');

/** `npm run --silent cli -- …` as an operator runs it, against this file's database. */
function cli(args: string[], env: Record<string, string> = {}) {
  const child = spawn('npm', ['run', '--silent', 'cli', '--', ...args], {
    cwd: ROOT,
    env: {
      PATH: `${path.join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`,
      HOME: process.env.HOME ?? '/root',
      DATABASE_URL: ctx.url,
      SECRET_KEY: TEST_SECRET_KEY,
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on('close', (code) => resolve({ code, stdout, stderr })));
}

test('GET /v1/webhooks and /deliveries show each outcome; the secret never appears', async () => {
  const { projectId, key } = await ctx.tenant();
  const good = await createEndpoint(ctx.sql, ctx.config, projectId, receiver.url('/accept'));
  const bad = await createEndpoint(ctx.sql, ctx.config, projectId, receiver.url('/reject'));
  const { eventId } = await emitEvent(ctx.sql, projectId);
  await waitFor('both deliveries', async () => {
    const rows = [...(await deliveriesFor(ctx.sql, good.endpoint.id)), ...(await deliveriesFor(ctx.sql, bad.endpoint.id))];
    return rows.length === 2 && rows.every((r) => r.status !== 'pending');
  });

  const listed = await ctx.call(key, '/v1/webhooks');
  assert.equal(listed.status, 200);
  const list = await listed.text();
  const { data } = JSON.parse(list);
  assert.deepEqual(data.map((e: { id: string }) => e.id).sort(), [good.endpoint.id, bad.endpoint.id].sort());
  const badView = data.find((e: { id: string }) => e.id === bad.endpoint.id);
  assert.deepEqual(Object.keys(badView).sort(), ['consecutive_failures', 'created_at', 'event_types', 'id', 'status', 'url']);
  assert.deepEqual([badView.status, badView.consecutive_failures], ['active', 1]);

  const delivered = await (await ctx.call(key, `/v1/webhooks/${good.endpoint.id}/deliveries`)).json();
  assert.equal(delivered.data.length, 1);
  assert.deepEqual(
    { ...delivered.data[0], id: undefined, created_at: undefined, last_attempt_at: undefined },
    { id: undefined, created_at: undefined, last_attempt_at: undefined, event_id: eventId, status: 'delivered', attempt_count: 1, next_attempt_at: null, response_status: 200, error: null },
  );
  const failedRes = await ctx.call(key, `/v1/webhooks/${bad.endpoint.id}/deliveries`);
  const failed = (await failedRes.json()).data[0];
  assert.deepEqual([failed.status, failed.attempt_count, failed.response_status, failed.error], ['failed', 1, 400, 'http_error']);
  assert.ok(!('response_body' in failed));

  for (const secret of [good.secret, bad.secret]) {
    assert.ok(!list.includes(secret) && !list.includes('whsec_'), 'no secret in the endpoint list');
  }
  const spec = await (await ctx.call(undefined, '/openapi.json')).text();
  assert.ok(!/secret_encrypted|whsec_/.test(spec));
});

test('deliveries of an unknown or foreign endpoint answer 404 not_found', async () => {
  const owner = await ctx.tenant();
  const other = await ctx.tenant();
  const { endpoint } = await createEndpoint(ctx.sql, ctx.config, owner.projectId, receiver.url('/accept'));
  for (const [key, id] of [[other.key, endpoint.id], [owner.key, 'wh_01HZZZZZZZZZZZZZZZZZZZZZZZ']]) {
    const res = await ctx.call(key, `/v1/webhooks/${id}/deliveries`);
    assert.equal(res.status, 404);
    assert.equal((await res.json()).error.type, 'not_found');
  }
  const foreignList = await (await ctx.call(other.key, '/v1/webhooks')).json();
  assert.deepEqual(foreignList.data, []);
  assert.equal((await ctx.call(undefined, `/v1/webhooks/${endpoint.id}/deliveries`)).status, 401);
});

test('CLI: webhook create prints the secret once; deliveries are signed with it; update prints no secret', async () => {
  const { projectId } = await ctx.tenant();
  const created = await cli(['webhook', 'create', '--project', projectId, '--url', receiver.url('/cli')]);
  assert.equal(created.code, 0, created.stderr);
  const out = JSON.parse(created.stdout);
  assert.match(out.id, /^wh_/);
  assert.equal(out.url, receiver.url('/cli'));
  assert.equal(out.status, 'active');
  assert.match(out.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);

  await emitEvent(ctx.sql, projectId);
  const req = await waitFor('the delivery', () => receiver.requests.find((r) => r.path === '/cli'));
  assert.ok(receiverVerifies(out.secret, req.headers, req.body), 'the printed secret verifies deliveries');

  const [disabled, refused, both] = await Promise.all([
    cli(['webhook', 'update', out.id, '--disable']),
    cli(['webhook', 'update', out.id, '--url', 'http://127.0.0.1/plain']),
    cli(['webhook', 'update', out.id, '--enable', '--disable']),
  ]);
  assert.equal(disabled.code, 0, disabled.stderr);
  const view = JSON.parse(disabled.stdout);
  assert.deepEqual([view.id, view.status, view.url], [out.id, 'disabled_by_user', receiver.url('/cli')]);
  assert.ok(!('secret' in view) && !disabled.stdout.includes('whsec_'));
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /must use https/);
  assert.equal(refused.stderr.trim().split('\n').length, 1, 'one line on stderr');
  assert.equal(both.code, 1);
  assert.match(both.stderr, /exclude each other/);

  const enabled = await cli(['webhook', 'update', out.id, '--enable', '--url', receiver.url('/cli-v2')]);
  assert.equal(enabled.code, 0, enabled.stderr);
  assert.deepEqual(JSON.parse(enabled.stdout), { ...view, status: 'active', url: receiver.url('/cli-v2') });
});

test('CLI --events: only the listed types are delivered; GET /v1/webhooks shows them; update --events all clears the filter', async () => {
  const { projectId, key } = await ctx.tenant();
  const [created, bogus] = await Promise.all([
    cli(['webhook', 'create', '--project', projectId, '--url', receiver.url('/filtered'), '--events', 'clicked,email.opened']),
    cli(['webhook', 'create', '--project', projectId, '--url', receiver.url('/bogus'), '--events', 'email.sent,email.read']),
  ]);
  assert.equal(created.code, 0, created.stderr);
  const out = JSON.parse(created.stdout);
  assert.deepEqual(out.event_types, ['email.opened', 'email.clicked']);
  assert.equal(bogus.code, 1);
  assert.match(bogus.stderr, /^mailroom: unknown event type email\.read; the types are email\.sent, .*email\.clicked, email\.received, project\.reputation_warning, .*account\.enforcement_changed, contact\.created, .*contact\.topics\.updated \(or all\)\n$/);
  const listed = (await (await ctx.call(key, '/v1/webhooks')).json()) as { data: { id: string; event_types: string[] | null }[] };
  assert.deepEqual(listed.data.map((e) => [e.id, e.event_types]), [[out.id, ['email.opened', 'email.clicked']]]);

  await emitEvent(ctx.sql, projectId);
  const clicked = await emitEvent(ctx.sql, projectId, 'email.clicked', { to: ['someone@example.com'], link: 'https://shop.example/', user_agent: 'x', machine: false });
  const req = await waitFor('the click delivery', () => receiver.requests.find((r) => r.path === '/filtered'));
  assert.equal(req.headers['x-webhook-event-id'], clicked.eventId);
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual(receiver.requests.filter((r) => r.path === '/filtered').map((r) => r.headers['x-webhook-event-type']), ['email.clicked'], 'the bounce was not delivered');

  const all = await cli(['webhook', 'update', out.id, '--events', 'all']);
  assert.equal(all.code, 0, all.stderr);
  assert.equal(JSON.parse(all.stdout).event_types, null);
  await emitEvent(ctx.sql, projectId);
  await waitFor('the bounce, once the filter is gone', () => receiver.requests.find((r) => r.path === '/filtered' && r.headers['x-webhook-event-type'] === 'email.bounced'));
});

test('CLI: a forbidden URL or an unknown endpoint exits 1 with one line', async () => {
  const { projectId } = await ctx.tenant();
  const [forbidden, unknown] = await Promise.all([
    cli(['webhook', 'create', '--project', projectId, '--url', 'https://169.254.169.254/latest'], { WEBHOOK_ALLOWED_CIDRS: '' }),
    cli(['webhook', 'update', 'wh_nope', '--disable']),
  ]);
  assert.equal(forbidden.code, 1);
  assert.match(forbidden.stderr, /^mailroom: webhook URL is not allowed: 169\.254\.169\.254 is a link-local address/);
  assert.equal(forbidden.stdout, '');
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /webhook endpoint wh_nope not found/);
  const [{ count }] = await ctx.sql<[{ count: number }]>`select count(*)::int from webhook_endpoints where project_id = ${projectId}`;
  assert.equal(count, 0);
});

test('redelivery sends the same event again as a new delivery; disabled endpoints 409, foreign ones 404', async () => {
  const { projectId, key } = await ctx.tenant();
  const other = await ctx.tenant();
  const hook = await createEndpoint(ctx.sql, ctx.config, projectId, receiver.url('/redeliver'));
  const { eventId } = await emitEvent(ctx.sql, projectId);
  const [first] = await waitFor('the first delivery', async () => {
    const rows = await deliveriesFor(ctx.sql, hook.endpoint.id);
    return rows.length === 1 && rows[0]!.status === 'delivered' && rows;
  });
  const path = `/v1/webhooks/${hook.endpoint.id}/deliveries/${first!.id}/retry`;
  const res = await ctx.call(key, path, { method: 'POST' });
  assert.equal(res.status, 202);
  const created = (await res.json()) as { id: string; event_id: string; status: string; attempt_count: number };
  assert.notEqual(created.id, first!.id);
  assert.equal(created.event_id, eventId);
  assert.equal(created.status, 'pending');
  assert.equal(created.attempt_count, 0);
  await waitFor('the redelivery', async () => (await deliveriesFor(ctx.sql, hook.endpoint.id)).every((r) => r.status === 'delivered') &&
    receiver.requests.filter((r) => r.path === '/redeliver').length === 2);
  const bodies = receiver.requests.filter((r) => r.path === '/redeliver').map((r) => JSON.parse(r.body.toString()).id);
  assert.deepEqual(bodies, [eventId, eventId], 'the same event, so receivers deduplicate it');

  assert.equal((await ctx.call(other.key, path, { method: 'POST' })).status, 404, 'another project');
  assert.equal((await ctx.call(key, `/v1/webhooks/${hook.endpoint.id}/deliveries/whd_01ARZ3NDEKTSV4RRFFQ69G5FAV/retry`, { method: 'POST' })).status, 404);
  assert.equal((await ctx.call(key, `/v1/webhooks/${hook.endpoint.id}/deliveries/nope/retry`, { method: 'POST' })).status, 404);
  const second = await createEndpoint(ctx.sql, ctx.config, projectId, receiver.url('/redeliver-2'));
  assert.equal((await ctx.call(key, `/v1/webhooks/${second.endpoint.id}/deliveries/${first!.id}/retry`, { method: 'POST' })).status, 404, 'a delivery of another endpoint');

  await ctx.sql`update webhook_endpoints set status = 'disabled_by_user' where id = ${hook.endpoint.id}`;
  const disabled = await ctx.call(key, path, { method: 'POST' });
  assert.equal(disabled.status, 409);
  assert.equal(((await disabled.json()) as { error: { type: string } }).error.type, 'endpoint_disabled');
});

/** The jobs still queued under these keys (a flush's is its endpoint's, a retry's its delivery id). */
async function jobsLeft(keys: string[]) {
  return ctx.sql<{ key: string; attempts: number; lastError: string | null }[]>`
    select key, attempts, last_error from graphile_worker.jobs where key = any(${keys})`;
}

test('DELETE /v1/webhooks/{id}: 204 once, recorded as webhook.deleted by the key; its pending deliveries are never posted', async () => {
  const { projectId, key, keyId } = await ctx.tenant();
  const hook = await createEndpoint(ctx.sql, ctx.config, projectId, receiver.url('/deleted'));
  const endpointId = hook.endpoint.id;
  // A first attempt and a retry, both queued to run just after the delete.
  await unqueuedDelivery(ctx.sql, projectId, endpointId);
  const retry = await unqueuedDelivery(ctx.sql, projectId, endpointId, undefined, 1);
  const soon = new Date(Date.now() + 300);
  await ctx.sql`select ${flushJob(ctx.sql, endpointId, projectId, { runAt: ctx.sql`${soon}::timestamptz`, keyMode: ctx.sql`'replace'` })}`;
  await ctx.sql`select ${deliverJob(ctx.sql, retry.id, projectId, soon)}`;

  const res = await ctx.call(key, `/v1/webhooks/${endpointId}`, { method: 'DELETE' });
  assert.equal(res.status, 204);
  assert.equal(await res.text(), '');
  assert.deepEqual((await (await ctx.call(key, '/v1/webhooks')).json()).data, [], 'no longer listed');
  assert.equal((await ctx.call(key, `/v1/webhooks/${endpointId}/deliveries`)).status, 404);
  assert.equal((await deliveriesFor(ctx.sql, endpointId)).length, 0, 'its deliveries went with it');

  // The queued jobs run, find nothing and finish: no request, no error, no retry.
  await waitFor('the queued jobs to finish', async () => (await jobsLeft([FLUSH_KEY_PREFIX + endpointId, retry.id])).length === 0, 10_000);
  await emitEvent(ctx.sql, projectId);
  assert.equal((await deliveriesFor(ctx.sql, endpointId)).length, 0, 'a new event goes nowhere');
  assert.equal(receiver.requests.filter((r) => r.path === '/deleted').length, 0);

  const again = await ctx.call(key, `/v1/webhooks/${endpointId}`, { method: 'DELETE' });
  assert.equal(again.status, 404, 'already deleted');
  assert.equal(((await again.json()) as { error: { type: string } }).error.type, 'not_found');
  const [entry, ...more] = await ctx.sql<{ actorType: string; actorId: string; targetId: string; changes: unknown }[]>`
    select actor_type, actor_id, target_id, changes from audit_log where project_id = ${projectId} and action = 'webhook.deleted'`;
  assert.equal(more.length, 0, 'recorded once');
  assert.deepEqual(entry, { actorType: 'api_key', actorId: keyId, targetId: endpointId, changes: { url: new URL(receiver.url('/')).origin + '/…' } });
});

test('DELETE /v1/webhooks/{id}: unknown, malformed or another project\'s endpoint answers 404 and nothing changes', async () => {
  const mine = await ctx.tenant();
  const other = await ctx.tenant();
  const theirs = await createEndpoint(ctx.sql, ctx.config, other.projectId, receiver.url('/theirs'));
  const delivery = await unqueuedDelivery(ctx.sql, other.projectId, theirs.endpoint.id);
  for (const id of [theirs.endpoint.id, 'wh_01ARZ3NDEKTSV4RRFFQ69G5FAV', 'nope']) {
    const res = await ctx.call(mine.key, `/v1/webhooks/${id}`, { method: 'DELETE' });
    assert.equal(res.status, 404, id);
    assert.equal(((await res.json()) as { error: { type: string } }).error.type, 'not_found');
  }
  assert.equal((await (await ctx.call(other.key, '/v1/webhooks')).json()).data.length, 1, 'still there');
  assert.deepEqual((await deliveriesFor(ctx.sql, theirs.endpoint.id)).map((d) => d.id), [delivery.id]);
  assert.equal((await ctx.sql`select 1 from audit_log where action = 'webhook.deleted' and target_id = ${theirs.endpoint.id}`).length, 0);
});

test('a delivery added while its endpoint was being deleted is dropped by the flush, which does not come back', async () => {
  const { projectId, key } = await ctx.tenant();
  const hook = await createEndpoint(ctx.sql, ctx.config, projectId, receiver.url('/orphan'));
  assert.equal((await ctx.call(key, `/v1/webhooks/${hook.endpoint.id}`, { method: 'DELETE' })).status, 204);
  // An event recorded by a transaction that read the endpoint before the delete committed.
  const orphan = await unqueuedDelivery(ctx.sql, projectId, hook.endpoint.id);
  await ctx.sql`select ${flushJob(ctx.sql, hook.endpoint.id, projectId)}`;
  await waitFor('the flush to finish', async () => (await jobsLeft([FLUSH_KEY_PREFIX + hook.endpoint.id])).length === 0, 10_000);
  assert.equal((await ctx.sql`select 1 from webhook_deliveries where id = ${orphan.id}`).length, 0, 'dropped, not left leased for a flush every minute');
  assert.equal(receiver.requests.filter((r) => r.path === '/orphan').length, 0);
});
