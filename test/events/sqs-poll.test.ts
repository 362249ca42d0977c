import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startSqsPolling } from '../../src/events/sqs-poll.ts';
import { ingestCounters } from '../../src/events/ingest.ts';
import { createLogger } from '../../src/platform/log.ts';
import { connectProvider, disconnectProvider } from '../../src/providers/connections.ts';
import { startWorkerServices } from '../../src/tasks.ts';
import { createTestContext, testConfig } from '../helpers/app.ts';
import { startFakeSqs } from '../helpers/fake-sqs.ts';
import { waitFor } from '../helpers/wait.ts';
import { activeEndpoint, eventsOf, sentEmail, ses, snsEnvelope } from './fixtures.ts';

const sqs = await startFakeSqs();
const ctx = await createTestContext({ env: { AWS_ENDPOINT_URL_SQS: sqs.endpoint, SINK_SMTP_PORT: '0' } });
const { sql, config } = ctx;
const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');
const FAST = { waitTimeSeconds: 1, refreshMs: 100, backoffBaseMs: 20, backoffMaxMs: 200 };

let queueCount = 0;
/** A project connected to SES with its own events queue on the fake. */
async function connectedProject(opts: { visibilitySeconds?: number } = {}) {
  const t = await ctx.tenant();
  const queueUrl = sqs.createQueue(`ses-events-${++queueCount}`, opts);
  await connectProvider(sql, config, {
    projectId: t.projectId, region: 'us-east-1', accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'test-secret',
    configurationSet: 'mailroom', eventsQueueUrl: queueUrl,
  });
  return { ...t, queueUrl };
}

async function eventCount(projectId: string) {
  const [row] = await sql<[{ n: number }]>`select count(*)::int as n from events where project_id = ${projectId}`;
  return row.n;
}

test('queued SES events become events, with their effects, and are deleted once handled', async () => {
  const t = await connectedProject();
  const endpointId = await activeEndpoint(sql, t.projectId);
  const delivered = await sentEmail(sql, t.projectId, ['ann@example.net']);
  const bounced = await sentEmail(sql, t.projectId, ['Bob <Bob@Example.net>']);
  const complained = await sentEmail(sql, t.projectId, ['cat@example.net']);

  const delivery = snsEnvelope(ses.delivery(delivered.providerMessageId, ['ann@example.net']));
  sqs.send(t.queueUrl, delivery);
  sqs.send(t.queueUrl, delivery); // SNS and SQS are at-least-once: the same notification twice
  sqs.send(t.queueUrl, snsEnvelope(ses.bounce(bounced.providerMessageId, 'Permanent', ['Bob@Example.net'])));
  sqs.send(t.queueUrl, JSON.stringify(ses.complaint(complained.providerMessageId, ['cat@example.net']))); // raw delivery
  sqs.send(t.queueUrl, snsEnvelope(ses.send(delivered.providerMessageId))); // ignored
  sqs.send(t.queueUrl, 'not an SES event at all'); // poison: dropped, not retried forever

  const polling = await startSqsPolling({ config, sql, log }, FAST);
  try {
    await waitFor('queue drained', () => sqs.remaining(t.queueUrl) === 0);
  } finally {
    await polling.close();
  }

  const [email] = await sql`select delivered_at from emails where id = ${delivered.id} and project_id = ${t.projectId}`;
  assert.deepEqual(email!.deliveredAt, new Date('2025-03-01T10:00:02.000Z'));
  const deliveredEvents = await eventsOf(sql, t.projectId, delivered.id);
  assert.deepEqual(deliveredEvents.map((e) => [e.type, e.data]), [
    ['email.delivered', { to: ['ann@example.net'], smtp_response: '250 2.6.0 Message received', tags: [] }],
  ]);

  const bounceEvents = await eventsOf(sql, t.projectId, bounced.id);
  assert.deepEqual(bounceEvents.map((e) => [e.type, e.data]), [
    ['email.bounced', { to: ['Bob@Example.net'], bounce_type: 'permanent', bounce_subtype: 'General', diagnostic: 'smtp; 550 5.1.1 user unknown', tags: [] }],
  ]);
  const complaintEvents = await eventsOf(sql, t.projectId, complained.id);
  assert.deepEqual(complaintEvents.map((e) => [e.type, e.data]), [['email.complained', { to: ['cat@example.net'], feedback_type: 'abuse', tags: [] }]]);

  const suppressions = await sql`select address, reason, email_id from suppressions where project_id = ${t.projectId} order by address`;
  assert.deepEqual(suppressions.map((s) => ({ ...s })), [
    { address: 'bob@example.net', reason: 'bounced', emailId: bounced.id },
    { address: 'cat@example.net', reason: 'complained', emailId: complained.id },
  ]);

  assert.equal(await eventCount(t.projectId), 3);
  const deliveries = await sql`select event_id from webhook_deliveries where project_id = ${t.projectId} and endpoint_id = ${endpointId}`;
  assert.equal(deliveries.length, 3, 'one pending webhook delivery per event for the active endpoint');
  assert.equal(sqs.deleted.filter((d) => d.queueUrl === t.queueUrl).length, 6, 'every message, duplicate and poison included, is deleted');
});

test('a message is deleted only after its event commits: a failed commit leaves it queued for redelivery', async () => {
  const t = await connectedProject({ visibilitySeconds: 1 });
  const email = await sentEmail(sql, t.projectId, ['ann@example.net']);
  // The first insert into events fails; the sequence advances even though the transaction rolls back.
  await sql.unsafe(`
    create sequence test_events_fail_once;
    create function test_events_fail_once() returns trigger language plpgsql as $$
      begin if nextval('test_events_fail_once') = 1 then raise exception 'injected database failure'; end if; return new; end $$;
    create trigger test_events_fail_once before insert on events for each row execute function test_events_fail_once();`);
  try {
    const message = sqs.send(t.queueUrl, snsEnvelope(ses.delivery(email.providerMessageId)));
    const polling = await startSqsPolling({ config, sql, log }, FAST);
    try {
      await waitFor('message deleted', () => sqs.remaining(t.queueUrl) === 0, 10_000);
    } finally {
      await polling.close();
    }
    const receives = sqs.calls.filter((c) => c.op === 'ReceiveMessage' && c.messageIds?.includes(message.messageId));
    assert.equal(receives.length, 2, 'received, failed to commit, received again after the visibility timeout');
    const [deletion] = sqs.deleted.filter((d) => d.messageId === message.messageId);
    assert.ok(deletion!.at >= receives[1]!.at, 'deleted only after the second, committed, attempt');
    assert.ok(receives[1]!.at - receives[0]!.at >= 900, 'not deleted after the failed attempt');
    assert.deepEqual((await eventsOf(sql, t.projectId, email.id)).map((e) => e.type), ['email.delivered']);
  } finally {
    await sql.unsafe(`drop trigger test_events_fail_once on events; drop function test_events_fail_once(); drop sequence test_events_fail_once;`);
  }
});

test('queue errors back off and recover without stopping the poller', async () => {
  const t = await connectedProject();
  const email = await sentEmail(sql, t.projectId);
  sqs.failNext('ReceiveMessage', 3);
  sqs.send(t.queueUrl, snsEnvelope(ses.deliveryDelay(email.providerMessageId)));
  const polling = await startSqsPolling({ config, sql, log }, FAST);
  try {
    await waitFor('event recorded', async () => (await eventCount(t.projectId)) === 1);
    await waitFor('message deleted', () => sqs.remaining(t.queueUrl) === 0);
  } finally {
    await polling.close();
  }
  assert.equal(sqs.calls.filter((c) => c.op === 'ReceiveMessage:failed').length, 3);
  assert.deepEqual((await eventsOf(sql, t.projectId, email.id)).map((e) => e.type), ['email.delivery_delayed']);
});

test('two replicas polling one queue with repeated notifications record each event once', async () => {
  const t = await connectedProject({ visibilitySeconds: 1 });
  const emails = await Promise.all([1, 2, 3, 4, 5].map(() => sentEmail(sql, t.projectId)));
  for (const e of emails) {
    const body = snsEnvelope(ses.bounce(e.providerMessageId, 'Transient'));
    for (let i = 0; i < 3; i++) sqs.send(t.queueUrl, body);
  }
  const a = await startSqsPolling({ config, sql, log }, FAST);
  const b = await startSqsPolling({ config, sql, log }, FAST);
  try {
    await waitFor('queue drained', () => sqs.remaining(t.queueUrl) === 0);
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
  assert.equal(await eventCount(t.projectId), 5);
  const suppressed = await sql`select 1 from suppressions where project_id = ${t.projectId}`;
  assert.equal(suppressed.length, 0, 'transient bounces do not suppress');
});

test('new connections start polling on refresh, events of another project are dropped, close aborts the long poll', async () => {
  const polling = await startSqsPolling({ config, sql, log }, { ...FAST, waitTimeSeconds: 20 });
  let closed = false;
  try {
    const t = await connectedProject();
    const other = await ctx.tenant('other');
    const email = await sentEmail(sql, t.projectId);
    const foreign = await sentEmail(sql, other.projectId);
    const unknownBefore = ingestCounters.unknownEmail;
    sqs.send(t.queueUrl, snsEnvelope(ses.bounce(foreign.providerMessageId, 'Permanent')));
    sqs.send(t.queueUrl, snsEnvelope(ses.delivery(email.providerMessageId)));
    await waitFor('queue drained', () => sqs.remaining(t.queueUrl) === 0);
    assert.equal(await eventCount(t.projectId), 1);
    assert.equal(await eventCount(other.projectId), 0);
    assert.equal(ingestCounters.unknownEmail, unknownBefore + 1);
    assert.equal((await sql`select 1 from suppressions where project_id = ${other.projectId}`).length, 0);

    // The poller is now inside a 20 s long poll on an empty queue.
    await new Promise((r) => setTimeout(r, 200));
    const started = Date.now();
    await polling.close();
    closed = true;
    assert.ok(Date.now() - started < 2_000, `close took ${Date.now() - started} ms`);
  } finally {
    if (!closed) await polling.close();
  }
});

test('the worker polls only when EVENT_INGESTION=queue', async () => {
  const t = await connectedProject();
  const email = await sentEmail(sql, t.projectId);

  const httpsConfig = testConfig(ctx.url, { EVENT_INGESTION: 'https', PUBLIC_BASE_URL: 'https://mail.example.test', AWS_ENDPOINT_URL_SQS: sqs.endpoint, SINK_SMTP_PORT: '0' });
  const httpsServices = await startWorkerServices({ config: httpsConfig, sql, log });
  assert.ok(!httpsServices.some(([name]) => name === 'sqs-poll'));
  for (const [, close] of httpsServices) await close();

  const services = await startWorkerServices({ config, sql, log });
  try {
    assert.ok(services.some(([name]) => name === 'sqs-poll'));
    sqs.send(t.queueUrl, snsEnvelope(ses.delivery(email.providerMessageId)));
    await waitFor('event recorded by the worker service', async () => (await eventCount(t.projectId)) === 1, 25_000);
  } finally {
    for (const [, close] of services) await close();
  }
});

test('a connect starts polling within 5 s and a disconnect stops it, with no refresh timer to help', async () => {
  const polling = await startSqsPolling({ config, sql, log }, { ...FAST, refreshMs: 600_000 });
  try {
    // A connection sealed under another SECRET_KEY is skipped, and stops nobody else.
    const broken = await ctx.tenant('sealed elsewhere');
    await connectProvider(sql, { ...config, secretKey: 'another-secret-key-that-is-long-enough-0123' }, {
      projectId: broken.projectId, region: 'us-east-1', accessKeyId: 'AKIDOLD', secretAccessKey: 'old', eventsQueueUrl: sqs.createQueue('sealed-elsewhere'),
    });
    const t = await connectedProject();
    const email = await sentEmail(sql, t.projectId);
    const connectedAt = Date.now();
    sqs.send(t.queueUrl, snsEnvelope(ses.delivery(email.providerMessageId)));
    await waitFor('the new queue to be polled', async () => (await eventCount(t.projectId)) === 1, 5_000);
    assert.ok(Date.now() - connectedAt < 5_000);

    await disconnectProvider(sql, t.projectId);
    await new Promise((r) => setTimeout(r, 1_500));
    sqs.send(t.queueUrl, snsEnvelope(ses.delivery(email.providerMessageId)));
    await new Promise((r) => setTimeout(r, 2_000));
    assert.equal(sqs.remaining(t.queueUrl), 1, 'nobody polls a disconnected project\'s queue');
  } finally {
    await polling.close();
  }
});
