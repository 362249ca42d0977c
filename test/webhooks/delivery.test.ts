import { after, describe, test } from 'node:test';
import { createSql } from '../../src/platform/db.ts';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { generateSigningSecret } from '../../src/webhooks/secret.ts';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { selfSignedCertificate, startHttpsReceiver } from '../helpers/https-receiver.ts';
import { waitFor } from '../helpers/wait.ts';
import { createEndpoint, deleteEndpoint, updateEndpoint } from '../../src/webhooks/service.ts';
import { attemptLoadQueries, webhookDeliverTask } from '../../src/webhooks/deliver.task.ts';
import { createAttempter } from '../../src/webhooks/attempt.ts';
import { FLUSH_IN_FLIGHT, flushEndpoint } from '../../src/webhooks/flush.task.ts';
import { setTimeout } from 'node:timers/promises';
import { createLogger } from '../../src/platform/log.ts';
import { newId } from '../../src/platform/ids.ts';
import { flushLock } from '../../src/webhooks/queries.ts';
import { deliveriesFor, emitEvent, emitEvents, endpointState, fakeDns, receiverVerifies, unqueuedDelivery, webhookWorker } from './helpers.ts';

const worker = webhookWorker();
// Loopback is let through the private-address rule the way an operator would for an internal receiver.
const ctx = await createTestContext({ env: { WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_RETRY_BASE_MS: '20' } });
const tls = selfSignedCertificate();
const receiver = await startHttpsReceiver(tls);
const dns = fakeDns({ 'hooks.test': ['127.0.0.1'] });
const overrides = { ca: tls.cert, resolve: dns.resolve, timeoutMs: 2000 };
await worker.start(ctx.config, ctx.sql, overrides);

/** Each test gets its own path on the receiver and its own project, so their requests don't mix. */
async function endpointAt(path: string) {
  const { projectId, key } = await ctx.tenant();
  const { endpoint, secret } = await createEndpoint(ctx.sql, ctx.config, projectId, receiver.url(path, 'hooks.test'), { resolve: dns.resolve });
  return { projectId, key, endpoint, secret, requests: () => receiver.requests.filter((r) => r.path === path) };
}

/** Routes by path so concurrent tests can script their own answers. */
type Answer = { status: number; headers?: Record<string, string>; body?: string } | 'hang';
/** A script may answer later (a promise), to hold a request open while the test looks at the row. */
const scripts = new Map<string, (n: number) => Answer | Promise<Answer>>();
receiver.respond(async (req, res) => {
  const script = scripts.get(req.path);
  const n = receiver.requests.filter((r) => r.path === req.path).length;
  const answer = script ? await script(n) : { status: 200, body: 'ok' };
  if (answer === 'hang') return;
  res.writeHead(answer.status, { 'content-type': 'text/plain', ...answer.headers }).end(answer.body ?? '');
});

const settled = (endpointId: string, count = 1) => waitFor('deliveries to settle', async () => {
  const rows = await deliveriesFor(ctx.sql, endpointId);
  return rows.length === count && rows.every((r) => r.status !== 'pending') && rows;
});

// Each test has its own project, endpoint and receiver path, so they run side by side.
describe('webhook delivery', { concurrency: true }, () => {
  test('a delivery carries Standard Webhooks headers that standardwebhooks and svix verify', async () => {
    const t = await endpointAt('/standard');
    const { eventId } = await emitEvent(ctx.sql, t.projectId);
    await settled(t.endpoint.id);
    const [req] = t.requests();
    assert.equal(req!.headers['webhook-id'], eventId);
    assert.equal(req!.headers['webhook-timestamp'], req!.headers['x-webhook-timestamp']);
    assert.match(String(req!.headers['webhook-signature']), /^v1,[A-Za-z0-9+/]{43}=$/);
    const headers = { 'webhook-id': String(req!.headers['webhook-id']), 'webhook-timestamp': String(req!.headers['webhook-timestamp']), 'webhook-signature': String(req!.headers['webhook-signature']) };
    const payload = req!.body.toString('utf8');
    const verified = new StandardWebhook(t.secret).verify(payload, headers) as { id: string };
    assert.equal(verified.id, eventId);
    assert.doesNotThrow(() => new SvixWebhook(t.secret).verify(payload, headers), 'svix verifies it');
    assert.throws(() => new SvixWebhook(t.secret).verify(`${payload} `, headers), 'svix refuses a changed body');
    assert.throws(() => new StandardWebhook(t.secret).verify(`${payload} `, headers), 'a changed body is refused');
    assert.throws(() => new StandardWebhook(generateSigningSecret()).verify(payload, headers), 'another secret is refused');
    assert.ok(receiverVerifies(t.secret, req!.headers, req!.body), 'the v1= header still verifies too');
  });

  test('a delivery whose secret no longer decrypts ends failed with a reason, never pending', async () => {
    const t = await endpointAt('/unreadable');
    await ctx.sql`update webhook_endpoints set secret_encrypted = ${Buffer.alloc(60, 7)} where id = ${t.endpoint.id}`;
    await emitEvent(ctx.sql, t.projectId);
    const [row] = await settled(t.endpoint.id);
    assert.equal(row!.status, 'failed');
    assert.equal(row!.error, 'secret_unreadable');
    assert.equal(row!.nextAttemptAt, null);
    assert.equal(t.requests().length, 0, 'nothing unsigned was sent');
    const stuck = await ctx.sql`select * from ops.stuck`;
    assert.equal(stuck.length, 0);
  });

  test('deleting an endpoint leaves none of its deliveries pending', async () => {
    const t = await endpointAt('/deleted');
    scripts.set('/deleted', () => ({ status: 503 }));
    await emitEvent(ctx.sql, t.projectId);
    await waitFor('a first attempt', async () => t.requests().length >= 1);
    // Through the service, as DELETE /v1/webhooks/:id does: the deliveries go before the endpoint,
    // so a retry settling meanwhile cannot deadlock with it.
    await deleteEndpoint(ctx.sql, t.projectId, t.endpoint.id);
    const [{ n }] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from webhook_deliveries where endpoint_id = ${t.endpoint.id} and status = 'pending'`;
    assert.equal(n, 0);
  });

  test('deleting an endpoint while an attempt settles one of its deliveries: both commit, no deadlock', async () => {
    const t = await endpointAt('/deleted-while-settling');
    scripts.set('/deleted-while-settling', () => ({ status: 503 }));
    await emitEvent(ctx.sql, t.projectId);
    await waitFor('a first attempt', async () => t.requests().length >= 1);
    const [delivery] = await ctx.sql<[{ id: string }]>`select id from webhook_deliveries where endpoint_id = ${t.endpoint.id}`;
    const sql = createSql(ctx.url, { max: 2 });
    after(() => sql.end());
    // As an attempt's settle does: the delivery's row, then the endpoint's, in one transaction.
    let lockedDelivery = () => {};
    const deliveryLocked = new Promise<void>((resolve) => { lockedDelivery = resolve; });
    const settling = sql.begin(async (tx) => {
      await tx`update webhook_deliveries set last_attempt_at = now() where id = ${delivery.id}`;
      lockedDelivery();
      await setTimeout(300); // the delete starts meanwhile
      await tx`update webhook_endpoints set last_error = 'HTTP 503', last_error_at = now() where id = ${t.endpoint.id}`;
    });
    await deliveryLocked;
    const deleting = deleteEndpoint(ctx.sql, t.projectId, t.endpoint.id);
    await Promise.all([settling, deleting]);
    const [{ n }] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from webhook_deliveries where endpoint_id = ${t.endpoint.id}`;
    assert.equal(n, 0);
  });

  test('an event reaches the endpoint as a signed POST a receiver can verify', async () => {
    const t = await endpointAt('/signed');
    const { eventId, emailId } = await emitEvent(ctx.sql, t.projectId);
    const [row] = await settled(t.endpoint.id);
    assert.equal(row!.status, 'delivered');
    assert.equal(row!.attemptCount, 1);
    assert.equal(row!.responseStatus, 200);
    assert.equal(row!.responseBody, 'ok');
    assert.equal(row!.nextAttemptAt, null);
    assert.equal(row!.error, null);

    const [req] = t.requests();
    assert.equal(req!.method, 'POST');
    assert.equal(req!.headers['content-type'], 'application/json');
    assert.equal(req!.headers['user-agent'], 'mailroom-webhooks/0.1.0');
    assert.equal(req!.headers['x-webhook-event-id'], eventId);
    assert.equal(req!.headers['x-webhook-event-type'], 'email.bounced');
    assert.match(String(req!.headers['x-webhook-signature']), /^v1=[0-9a-f]{64}$/);
    assert.ok(receiverVerifies(t.secret, req!.headers, req!.body), 'signature verifies with the endpoint secret');
    assert.ok(!receiverVerifies(`${t.secret}x`, req!.headers, req!.body), 'another secret does not verify');
    assert.ok(!receiverVerifies(t.secret, req!.headers, Buffer.concat([req!.body, Buffer.from(' ')])), 'a changed body does not verify');
    assert.ok(!receiverVerifies(t.secret, req!.headers, req!.body, Date.now() / 1000 + 301), 'a stale timestamp is refused');

    const body = JSON.parse(req!.body.toString('utf8'));
    assert.deepEqual(Object.keys(body).sort(), ['created_at', 'data', 'email_id', 'id', 'type']);
    assert.equal(body.id, eventId);
    assert.equal(body.type, 'email.bounced');
    assert.equal(body.email_id, emailId);
    assert.match(body.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/);
    assert.deepEqual(body.data.to, ['someone@example.com']);
    assert.equal(body.data.bounce_type, 'permanent');
  });

  test('5xx answers are retried with the same event until one succeeds', async () => {
    const t = await endpointAt('/flaky');
    scripts.set('/flaky', (n) => (n <= 2 ? { status: 500, body: 'boom' } : { status: 200, body: 'ok' }));
    // One earlier failure on the endpoint, to see a success clear it.
    await ctx.sql`update webhook_endpoints set consecutive_failures = 3 where id = ${t.endpoint.id}`;
    await emitEvent(ctx.sql, t.projectId);
    const [row] = await settled(t.endpoint.id);
    assert.equal(row!.status, 'delivered');
    assert.equal(row!.attemptCount, 3);
    assert.equal(row!.responseStatus, 200);
    assert.equal(row!.error, null);
    const reqs = t.requests();
    assert.equal(reqs.length, 3);
    assert.equal(new Set(reqs.map((r) => r.headers['x-webhook-event-id'])).size, 1, 'every attempt carries the same event id');
    assert.ok(reqs.every((r) => receiverVerifies(t.secret, r.headers, r.body)));
    assert.equal((await endpointState(ctx.sql, t.endpoint.id)).consecutiveFailures, 0, 'a success resets the count');
    // ops.webhook_health reads the settle's counters and the retries' error (§17.2).
    const [health] = await ctx.sql`select success_rate_24h_pct::float8 as rate, last_error from ops.webhook_health where endpoint_id = ${t.endpoint.id}`;
    assert.deepEqual([health!.rate, health!.lastError], [100, 'http_error']);
  });

  test('after six attempts the delivery fails and counts against the endpoint', async () => {
    const t = await endpointAt('/down');
    scripts.set('/down', () => ({ status: 503, body: 'down for maintenance' }));
    await emitEvent(ctx.sql, t.projectId);
    const [row] = await waitFor('six attempts', async () => {
      const rows = await deliveriesFor(ctx.sql, t.endpoint.id);
      return rows[0]?.status === 'failed' && rows;
    }, 30_000);
    assert.equal(row!.attemptCount, 6);
    assert.equal(row!.responseStatus, 503);
    assert.equal(row!.error, 'http_error');
    assert.equal(row!.nextAttemptAt, null);
    assert.equal(t.requests().length, 6);
    const ep = await endpointState(ctx.sql, t.endpoint.id);
    assert.equal(ep.consecutiveFailures, 1);
    assert.equal(ep.status, 'active');
  });

  test('a 4xx other than 429 fails at once and keeps a text body for the log', async () => {
    const t = await endpointAt('/bad-request');
    scripts.set('/bad-request', () => ({ status: 422, headers: { 'content-type': 'application/problem+json' }, body: '{"title":"unknown field"}' }));
    await emitEvent(ctx.sql, t.projectId);
    const [row] = await settled(t.endpoint.id);
    assert.equal(row!.status, 'failed');
    assert.equal(row!.attemptCount, 1);
    assert.equal(row!.responseStatus, 422);
    assert.equal(row!.responseBody, '{"title":"unknown field"}');
    assert.equal(row!.error, 'http_error');
    assert.equal(t.requests().length, 1);
    assert.equal((await endpointState(ctx.sql, t.endpoint.id)).consecutiveFailures, 1);
    const [health] = await ctx.sql`select success_rate_24h_pct::float8 as rate, last_error from ops.webhook_health where endpoint_id = ${t.endpoint.id}`;
    assert.deepEqual([health!.rate, health!.lastError], [0, 'http_error']);
  });

  test('a redirect is never followed', async () => {
    const t = await endpointAt('/moved');
    scripts.set('/moved', () => ({ status: 302, headers: { location: receiver.url('/moved-target') } }));
    await emitEvent(ctx.sql, t.projectId);
    const [row] = await settled(t.endpoint.id);
    assert.equal(row!.status, 'failed');
    assert.equal(row!.attemptCount, 1);
    assert.equal(row!.responseStatus, 302);
    assert.equal(row!.error, 'redirect_not_followed');
    assert.equal(receiver.requests.filter((r) => r.path === '/moved-target').length, 0);
  });

  test('Retry-After on a 429 is honoured', async () => {
    const t = await endpointAt('/slow-down');
    scripts.set('/slow-down', (n) => (n === 1 ? { status: 429, headers: { 'retry-after': '2' } } : { status: 200 }));
    await emitEvent(ctx.sql, t.projectId);
    const pending = await waitFor('the first attempt', async () => {
      const [r] = await deliveriesFor(ctx.sql, t.endpoint.id);
      return r?.attemptCount === 1 && r;
    });
    assert.equal(pending.status, 'pending');
    assert.equal(pending.responseStatus, 429);
    assert.equal(pending.error, 'http_error');
    assert.ok(pending.nextAttemptAt!.getTime() - pending.lastAttemptAt!.getTime() >= 1900, 'next attempt no sooner than asked');
    const [row] = await settled(t.endpoint.id);
    assert.equal(row!.status, 'delivered');
    const [first, second] = t.requests();
    // With a 20 ms backoff base, only Retry-After explains a two-second gap.
    assert.ok(second!.at - first!.at >= 1900, `retried after ${second!.at - first!.at} ms`);
  });

  test('Retry-After is honoured only up to 160 s', async () => {
    const t = await endpointAt('/go-away');
    scripts.set('/go-away', () => ({ status: 503, headers: { 'retry-after': '86400' } }));
    await emitEvent(ctx.sql, t.projectId);
    const row = await waitFor('the first attempt', async () => {
      const [r] = await deliveriesFor(ctx.sql, t.endpoint.id);
      return r?.attemptCount === 1 && r;
    });
    const wait = row.nextAttemptAt!.getTime() - row.lastAttemptAt!.getTime();
    assert.ok(wait > 155_000 && wait <= 161_000, `waits ${wait} ms`);
    await updateEndpoint(ctx.sql, ctx.config, t.projectId, t.endpoint.id, { enabled: false });
  });

  test('a timeout is retried and recorded without a response status', async () => {
    const t = await endpointAt('/hangs');
    // The first request is held open past the 2 s timeout the worker was given. The retry is
    // held too, until the row has been seen between the attempts, so the check can't miss it.
    let release = () => {};
    const released = new Promise<void>((resolve) => { release = resolve; });
    scripts.set('/hangs', (n) => (n === 1 ? 'hang' : released.then(() => ({ status: 200, body: 'ok' }))));
    await emitEvent(ctx.sql, t.projectId);
    const pending = await waitFor('the timed-out attempt', async () => {
      const [r] = await deliveriesFor(ctx.sql, t.endpoint.id);
      return r?.attemptCount === 1 && r;
    });
    release();
    assert.equal(pending.status, 'pending');
    assert.equal(pending.error, 'timeout');
    assert.equal(pending.responseStatus, null);
    const [row] = await settled(t.endpoint.id);
    assert.equal(row!.status, 'delivered');
    assert.equal(row!.attemptCount, 2);
  });

  test('ten consecutive failed deliveries disable the endpoint', async () => {
    const t = await endpointAt('/gone');
    scripts.set('/gone', () => ({ status: 410, body: 'gone' }));
    for (let i = 0; i < 10; i++) await emitEvent(ctx.sql, t.projectId);
    await settled(t.endpoint.id, 10);
    const ep = await endpointState(ctx.sql, t.endpoint.id);
    assert.equal(ep.consecutiveFailures, 10);
    assert.equal(ep.status, 'disabled_after_failures');
    // Nothing more is queued for it.
    await emitEvent(ctx.sql, t.projectId);
    assert.equal((await deliveriesFor(ctx.sql, t.endpoint.id)).length, 10);
    assert.equal(t.requests().length, 10);
  });

  test('nine failures and a success leave the endpoint active with a clean count', async () => {
    const t = await endpointAt('/mostly-failing');
    let failNext = true;
    scripts.set('/mostly-failing', () => (failNext ? { status: 400 } : { status: 204 }));
    for (let i = 0; i < 9; i++) await emitEvent(ctx.sql, t.projectId);
    await settled(t.endpoint.id, 9);
    assert.equal((await endpointState(ctx.sql, t.endpoint.id)).consecutiveFailures, 9);
    failNext = false;
    await emitEvent(ctx.sql, t.projectId);
    await settled(t.endpoint.id, 10);
    const ep = await endpointState(ctx.sql, t.endpoint.id);
    assert.deepEqual([ep.status, ep.consecutiveFailures], ['active', 0]);
  });

  test('a URL edit applies to a delivery already queued', async () => {
    const t = await endpointAt('/old');
    // The old URL asks for a pause, long enough to edit the endpoint while the retry waits.
    scripts.set('/old', () => ({ status: 503, headers: { 'retry-after': '2' } }));
    const { eventId } = await emitEvent(ctx.sql, t.projectId);
    await waitFor('the first attempt', async () => (await deliveriesFor(ctx.sql, t.endpoint.id))[0]?.attemptCount === 1);
    const edited = await updateEndpoint(ctx.sql, ctx.config, t.projectId, t.endpoint.id, { url: receiver.url('/new', 'hooks.test') }, { resolve: dns.resolve });
    assert.equal(edited.url, receiver.url('/new', 'hooks.test'));
    const [row] = await settled(t.endpoint.id);
    assert.equal(row!.status, 'delivered');
    assert.equal(row!.attemptCount, 2);
    const [moved] = receiver.requests.filter((r) => r.path === '/new');
    assert.equal(moved!.headers['x-webhook-event-id'], eventId);
    assert.ok(receiverVerifies(t.secret, moved!.headers, moved!.body), 'the secret survives the edit');
    assert.equal(t.requests().length, 1);
  });

  test('a delivery due for a disabled endpoint settles as endpoint_disabled without a request', async () => {
    const t = await endpointAt('/switched-off');
    // The user switches the endpoint off in the same moment the event is queued for it.
    await emitEvent(ctx.sql, t.projectId, 'email.delivered', { to: ['someone@example.com'], smtp_response: '250 ok' }, (tx) =>
      tx`update webhook_endpoints set status = 'disabled_by_user' where id = ${t.endpoint.id} and project_id = ${t.projectId}`);
    const [row] = await settled(t.endpoint.id);
    assert.equal(row!.status, 'failed');
    assert.equal(row!.error, 'endpoint_disabled');
    assert.equal(row!.attemptCount, 0);
    assert.equal(row!.responseStatus, null);
    assert.equal(t.requests().length, 0);
    assert.equal((await endpointState(ctx.sql, t.endpoint.id)).consecutiveFailures, 0);
  });

  test('running the task again for a settled delivery does nothing; a race settles once', async () => {
    const t = await endpointAt('/twice');
    await emitEvent(ctx.sql, t.projectId);
    const [row] = await settled(t.endpoint.id);
    const task = webhookDeliverTask({ config: ctx.config, sql: ctx.sql, log: createLogger('silent'), webhooks: overrides });
    await task({ delivery_id: row!.id, project_id: t.projectId }, {} as never);
    assert.equal(t.requests().length, 1, 'a delivered delivery is not sent again');
    assert.deepEqual((await deliveriesFor(ctx.sql, t.endpoint.id))[0], row);

    // A retry due with no job, run twice at once: at-least-once may POST twice, but it settles once.
    const race = await createEndpoint(ctx.sql, ctx.config, t.projectId, receiver.url('/race', 'hooks.test'), { resolve: dns.resolve });
    await unqueuedDelivery(ctx.sql, t.projectId, race.endpoint.id, 'whd_race', 1);
    const payload = { delivery_id: 'whd_race', project_id: t.projectId };
    await Promise.all([task(payload, {} as never), task(payload, {} as never)]);
    const [raced] = await deliveriesFor(ctx.sql, race.endpoint.id);
    assert.equal(raced!.status, 'delivered');
    assert.equal(raced!.attemptCount, 2);

    // Another project's id for the delivery finds nothing and changes nothing.
    const other = await ctx.tenant();
    await ctx.sql`update webhook_deliveries set status = 'pending' where id = 'whd_race'`;
    await task({ delivery_id: 'whd_race', project_id: other.projectId }, {} as never);
    assert.equal((await deliveriesFor(ctx.sql, race.endpoint.id))[0]!.attemptCount, 2);

    await assert.rejects(async () => task({ project_id: t.projectId }, {} as never), /delivery_id/, 'an invalid payload is refused');
  });

  test('attempts starting together load in one query, each delivery only under its own project', async () => {
    const a = await endpointAt('/shared-load-a');
    const b = await endpointAt('/shared-load-b');
    // Retries with no job, so only the runs below attempt them.
    const first = await unqueuedDelivery(ctx.sql, a.projectId, a.endpoint.id, 'whd_shared_a', 1);
    const second = await unqueuedDelivery(ctx.sql, b.projectId, b.endpoint.id, 'whd_shared_b', 1);
    // A pool of its own, so the worker's other attempts in this file don't share its queries.
    const sql = createSql(ctx.url, { max: 2 });
    after(() => sql.end());
    const task = webhookDeliverTask({ config: ctx.config, sql, log: createLogger('silent'), webhooks: overrides });
    await Promise.all([
      task({ delivery_id: 'whd_shared_a', project_id: a.projectId }, {} as never),
      task({ delivery_id: 'whd_shared_b', project_id: b.projectId }, {} as never),
      // A job naming another project's delivery, in the same query as that project's own.
      task({ delivery_id: 'whd_shared_a', project_id: b.projectId }, {} as never),
    ]);
    assert.equal(attemptLoadQueries(sql), 1, 'the three runs shared one query');
    for (const [t, { eventId }] of [[a, first], [b, second]] as const) {
      const requests = t.requests();
      assert.equal(requests.length, 1, 'each delivery was sent once, to its own endpoint');
      assert.equal(requests[0]!.headers['webhook-id'], eventId);
      assert.ok(receiverVerifies(t.secret, requests[0]!.headers, requests[0]!.body));
      assert.equal((await deliveriesFor(ctx.sql, t.endpoint.id))[0]!.attemptCount, 2);
    }
  });

  test('the attempt load is planned afresh each time, never kept as a prepared statement', async () => {
    const t = await endpointAt('/unprepared-load');
    await unqueuedDelivery(ctx.sql, t.projectId, t.endpoint.id, 'whd_unprepared', 1);
    // One connection, so the statements the task prepared are the ones this session lists.
    const sql = createSql(ctx.url, { max: 1 });
    after(() => sql.end());
    const task = webhookDeliverTask({ config: ctx.config, sql, log: createLogger('silent'), webhooks: overrides });
    await task({ delivery_id: 'whd_unprepared', project_id: t.projectId }, {} as never);
    assert.equal((await deliveriesFor(ctx.sql, t.endpoint.id))[0]!.status, 'delivered');
    const prepared = (await sql<{ statement: string }[]>`select statement from pg_prepared_statements`).map((r) => r.statement);
    assert.ok(prepared.some((s) => s.includes('update webhook_deliveries')), 'the settle is prepared as usual');
    assert.ok(!prepared.some((s) => s.includes('from webhook_deliveries d')), 'the load is not');
  });
  test('a webhook__deliver job for a delivery never attempted hands it to its endpoint\'s flush, which sends it once', async () => {
    const t = await endpointAt('/handed-over');
    // As a job queued before flushes took first attempts over would find it.
    const { id, eventId } = await unqueuedDelivery(ctx.sql, t.projectId, t.endpoint.id);
    const sql = createSql(ctx.url, { max: 1 });
    after(() => sql.end());
    const task = webhookDeliverTask({ config: ctx.config, sql, log: createLogger('silent'), webhooks: overrides });
    await task({ delivery_id: id, project_id: t.projectId }, {} as never);
    // The task itself sent nothing: had it, the request would have been answered before it returned.
    assert.equal(t.requests().length, 0);
    const [row] = await settled(t.endpoint.id);
    assert.equal(row!.status, 'delivered');
    assert.equal(row!.attemptCount, 1);
    assert.deepEqual(t.requests().map((r) => r.headers['webhook-id']), [eventId], 'sent once, by the flush');
  });

  test('a flush posts its endpoint\'s deliveries several at once, each once, never more than its limit at once', async () => {
    const t = await endpointAt('/flush-batch');
    let inFlight = 0;
    let most = 0;
    scripts.set('/flush-batch', async () => {
      most = Math.max(most, ++inFlight);
      await setTimeout(20);
      inFlight--;
      return { status: 200, body: 'ok' };
    });
    await emitEvents(ctx.sql, t.projectId, 40);
    const rows = await settled(t.endpoint.id, 40);
    assert.ok(rows.every((r) => r.status === 'delivered' && r.attemptCount === 1 && r.responseStatus === 200));
    const requests = t.requests();
    assert.equal(requests.length, 40);
    assert.equal(new Set(requests.map((r) => r.headers['webhook-id'])).size, 40, 'each event was sent once');
    assert.ok(requests.every((r) => receiverVerifies(t.secret, r.headers, r.body)));
    assert.ok(most > 1, `requests went out together (${most} at most)`);
    assert.ok(most <= FLUSH_IN_FLIGHT, `at most ${FLUSH_IN_FLIGHT} at once to one endpoint, saw ${most}`);
  });

  test('once failures disable the endpoint in the middle of a flush, the rest settle as endpoint_disabled unsent', async () => {
    const t = await endpointAt('/flush-gone');
    scripts.set('/flush-gone', () => ({ status: 410, body: 'gone' }));
    await emitEvents(ctx.sql, t.projectId, 30);
    const rows = await settled(t.endpoint.id, 30);
    const posted = rows.filter((r) => r.attemptCount === 1);
    const unsent = rows.filter((r) => r.attemptCount === 0);
    assert.ok(posted.every((r) => r.status === 'failed' && r.responseStatus === 410 && r.error === 'http_error'));
    assert.ok(unsent.every((r) => r.status === 'failed' && r.responseStatus === null && r.error === 'endpoint_disabled'));
    assert.equal(t.requests().length, posted.length);
    // The tenth failure disables it; only requests already out by then may still have gone.
    assert.ok(posted.length >= 10 && posted.length < 10 + FLUSH_IN_FLIGHT, `${posted.length} were sent`);
    const ep = await endpointState(ctx.sql, t.endpoint.id);
    assert.equal(ep.status, 'disabled_after_failures');
    assert.equal(ep.consecutiveFailures, posted.length, 'every failed request counts, none of the unsent');
  });

  test('two flushes of one endpoint at once send each delivery once; one held by a flush that died goes when its lease runs out', async () => {
    const t = await endpointAt('/flush-twice');
    const deliveries = [];
    for (let i = 0; i < 24; i++) deliveries.push(await unqueuedDelivery(ctx.sql, t.projectId, t.endpoint.id));
    const held = deliveries[0]!;
    // As a flush that claimed it and then died would leave it. The lease outlasts the two flushes
    // (about 0.2 s) by far even on a loaded machine, so neither of them may take it.
    await ctx.sql`update webhook_deliveries set leased_until = now() + interval '4 seconds' where id = ${held.id}`;
    // A pool of its own, so these runs share no query with the worker's.
    const sql = createSql(ctx.url, { max: 4 });
    after(() => sql.end());
    const deps = { config: ctx.config, sql, log: createLogger('silent'), webhooks: overrides };
    const attempter = createAttempter(deps);
    await Promise.all([flushEndpoint(sql, attempter, t.projectId, t.endpoint.id), flushEndpoint(sql, attempter, t.projectId, t.endpoint.id)]);
    const sent = t.requests().map((r) => r.headers['webhook-id']);
    assert.equal(sent.length, 23, 'every free delivery sent, by one flush or the other');
    assert.equal(new Set(sent).size, 23, 'none sent twice');
    assert.ok(!sent.includes(held.eventId), 'the held one waits for its lease');
    // A retry job for the held delivery leaves it to the flush that holds it.
    await webhookDeliverTask(deps)({ delivery_id: held.id, project_id: t.projectId }, {} as never);
    assert.equal(t.requests().length, 23);
    // The flushes left a job for when the lease runs out; the worker runs it.
    const rows = await settled(t.endpoint.id, 24);
    assert.ok(rows.every((r) => r.status === 'delivered' && r.attemptCount === 1));
    assert.equal(t.requests().filter((r) => r.headers['webhook-id'] === held.eventId).length, 1);
  });

  test('a delivery committed while a flush finds nothing is sent, though the job it added was swallowed by that flush', async () => {
    // graphile-worker drops a keyed job added while a worker locks it; the flush holding that lock
    // may have looked already. The adding transaction is held open here, without a job, until the
    // flush is done looking: the flush waits for it, sees the delivery, and queues the next flush.
    const t = await endpointAt('/flush-swallowed');
    const sql = createSql(ctx.url, { max: 4 });
    after(() => sql.end());
    const attempter = createAttempter({ config: ctx.config, sql, log: createLogger('silent'), webhooks: overrides });
    let commit = () => {};
    const committing = new Promise<void>((resolve) => { commit = resolve; });
    let added = () => {};
    const addedRow = new Promise<void>((resolve) => { added = resolve; });
    const adding = sql.begin(async (tx) => {
      const emailId = newId('email');
      const eventId = newId('event');
      await tx`select ${flushLock(tx, tx`${t.endpoint.id}::text`, 'shared')}`;
      await tx`insert into emails (id, project_id, from_address, to_addresses, subject, text)
        values (${emailId}, ${t.projectId}, 'sender@example.com', ${['someone@example.com']}, 'hello', 'hi')`;
      await tx`insert into events (id, project_id, email_id, type, data)
        values (${eventId}, ${t.projectId}, ${emailId}, 'email.delivered', ${tx.json({ to: ['someone@example.com'] })})`;
      await tx`insert into webhook_deliveries (id, project_id, endpoint_id, event_id, email_id) values (${newId('delivery')}, ${t.projectId}, ${t.endpoint.id}, ${eventId}, ${emailId})`;
      added();
      await committing;
    });
    await addedRow;
    let flushed = false;
    const flushing = flushEndpoint(sql, attempter, t.projectId, t.endpoint.id).then(() => { flushed = true; });
    await setTimeout(300);
    assert.equal(flushed, false, 'the flush waits for the transaction adding to its endpoint');
    commit();
    await adding;
    await flushing;
    const [row] = await settled(t.endpoint.id, 1);
    assert.equal(row!.status, 'delivered');
    assert.equal(t.requests().length, 1);
  });

  test('a flush told to stop lets go of what it has not sent, and a flush to come sends it', async () => {
    const t = await endpointAt('/flush-stop');
    const stop = new AbortController();
    let release = () => {};
    const released = new Promise<void>((resolve) => { release = resolve; });
    // The first round is held open; the stop comes while it is out.
    scripts.set('/flush-stop', async () => {
      stop.abort();
      await released;
      return { status: 200, body: 'ok' };
    });
    const count = FLUSH_IN_FLIGHT + 4;
    for (let i = 0; i < count; i++) await unqueuedDelivery(ctx.sql, t.projectId, t.endpoint.id);
    const sql = createSql(ctx.url, { max: 4 });
    after(() => sql.end());
    const attempter = createAttempter({ config: ctx.config, sql, log: createLogger('silent'), webhooks: overrides });
    const flushing = flushEndpoint(sql, attempter, t.projectId, t.endpoint.id, stop.signal);
    await waitFor('the first round', async () => t.requests().length === FLUSH_IN_FLIGHT);
    release();
    await flushing;
    // The worker's flush, queued by the one that stopped, sends the rest.
    const rows = await settled(t.endpoint.id, count);
    assert.ok(rows.every((r) => r.status === 'delivered' && r.attemptCount === 1));
    assert.equal(new Set(t.requests().map((r) => r.headers['webhook-id'])).size, count);
    assert.equal(t.requests().length, count);
  });
});
