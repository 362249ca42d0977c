import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ingestCounters } from '../../src/events/ingest.ts';
import { createApp } from '../../src/http/app.ts';
import { connectProvider } from '../../src/providers/connections.ts';
import { createTestContext } from '../helpers/app.ts';
import { createSnsSigner, generateCertificate, TEST_CERT_URL } from '../helpers/sns-signer.ts';
import { activeEndpoint, eventsOf, sentEmail, ses } from './fixtures.ts';

const ctx = await createTestContext({ env: { EVENT_INGESTION: 'https', PUBLIC_BASE_URL: 'https://mail.example.test' } });
const signer = createSnsSigner();
ctx.deps.snsFetch = signer.fetcher;
const { sql } = ctx;

const TOPIC = 'arn:aws:sns:us-east-1:123456789012:mailroom-events';
const t = await ctx.tenant();
await connectProvider(sql, ctx.config, {
  projectId: t.projectId, region: 'us-east-1', accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'test-secret',
  configurationSet: 'mailroom', snsTopicArn: TOPIC,
});

function post(body: unknown, app = ctx.app) {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  const type = typeof body === 'object' && body && 'Type' in body ? String(body.Type) : 'Notification';
  // SNS posts JSON labelled text/plain.
  return app.request('/v1/events/ses', {
    method: 'POST',
    headers: { 'content-type': 'text/plain; charset=UTF-8', 'x-amz-sns-message-type': type },
    body: text,
  });
}

async function assertRejected(res: Response, what: string) {
  assert.equal(res.status, 403, what);
  const body = await res.json() as { error: { type: string } };
  assert.equal(body.error.type, 'invalid_signature', what);
}

async function eventCount() {
  const [row] = await sql<[{ n: number }]>`select count(*)::int as n from events where project_id = ${t.projectId}`;
  return row.n;
}

test('valid SignatureVersion 1 and 2 notifications are verified and recorded', async () => {
  const endpointId = await activeEndpoint(sql, t.projectId);
  const a = await sentEmail(sql, t.projectId, ['ann@example.net']);
  const b = await sentEmail(sql, t.projectId, ['Bob@Example.net']);

  const v1 = await post(signer.notification(TOPIC, ses.delivery(a.providerMessageId, ['ann@example.net']), { version: '1' }));
  assert.equal(v1.status, 200);
  const v2 = await post(signer.notification(TOPIC, ses.bounce(b.providerMessageId, 'Permanent', ['Bob@Example.net']), { version: '2', subject: 'Amazon SES Email Event Notification' }));
  assert.equal(v2.status, 200);

  const [row] = await sql`select delivered_at from emails where id = ${a.id} and project_id = ${t.projectId}`;
  assert.deepEqual(row!.deliveredAt, new Date('2025-03-01T10:00:02.000Z'));
  assert.deepEqual((await eventsOf(sql, t.projectId, a.id)).map((e) => e.type), ['email.delivered']);
  const bounce = await eventsOf(sql, t.projectId, b.id);
  assert.deepEqual(bounce.map((e) => [e.type, e.data]), [
    ['email.bounced', { to: ['Bob@Example.net'], bounce_type: 'permanent', bounce_subtype: 'General', diagnostic: 'smtp; 550 5.1.1 user unknown', tags: [] }],
  ]);
  const suppressed = await sql`select reason from suppressions where project_id = ${t.projectId} and address = 'bob@example.net'`;
  assert.equal(suppressed[0]?.reason, 'bounced');

  const deliveries = await sql`select 1 from webhook_deliveries where project_id = ${t.projectId} and endpoint_id = ${endpointId}`;
  assert.equal(deliveries.length, 2, 'each pushed event fans out to the active endpoint');
  assert.ok(signer.fetcher.certRequests.every((u) => u === TEST_CERT_URL));
});

test('a repeated SNS MessageId, or the same SES notification republished, makes one event', async () => {
  const email = await sentEmail(sql, t.projectId);
  const before = await eventCount();
  const record = ses.complaint(email.providerMessageId);
  const message = signer.notification(TOPIC, record);
  assert.equal((await post(message)).status, 200);
  assert.equal((await post(message)).status, 200, 'a duplicate is acknowledged so SNS stops retrying');
  assert.equal((await post(signer.notification(TOPIC, record))).status, 200);
  assert.equal(await eventCount(), before + 1);
  const seen = await sql`select 1 from sns_messages where message_id = ${message.MessageId!}`;
  assert.equal(seen.length, 1);
});

test('an unknown provider message id is acknowledged, counted and dropped', async () => {
  const before = ingestCounters.unknownEmail;
  const eventsBefore = await eventCount();
  const res = await post(signer.notification(TOPIC, ses.delivery('0100018f-never-sent-here')));
  assert.equal(res.status, 200);
  assert.equal(ingestCounters.unknownEmail, before + 1);
  assert.equal(await eventCount(), eventsBefore);
});

test('anything unverifiable answers 403 invalid_signature and records nothing', async () => {
  const email = await sentEmail(sql, t.projectId);
  const record = ses.delivery(email.providerMessageId);
  const good = signer.notification(TOPIC, record);
  const forger = generateCertificate();

  await assertRejected(await post({ ...good, Message: JSON.stringify(ses.bounce(email.providerMessageId, 'Permanent')) }), 'tampered message');
  await assertRejected(await post({ ...good, Signature: Buffer.alloc(256, 1).toString('base64') }), 'bad signature');
  await assertRejected(await post({ ...good, SignatureVersion: '2' }), 'v1 signature presented as v2');
  await assertRejected(await post(signer.sign({ ...good, MessageId: 'forged-1' }, { keyPem: forger.keyPem })), 'signed by another key');

  signer.serveCert('https://sns.us-east-1.amazonaws.com.evil.example/cert.pem', forger.certPem);
  signer.serveCert('http://sns.us-east-1.amazonaws.com/cert.pem', forger.certPem);
  const requestsBefore = signer.fetcher.certRequests.length;
  for (const certUrl of [
    'https://sns.us-east-1.amazonaws.com.evil.example/cert.pem',
    'https://evil.example/sns.us-east-1.amazonaws.com.pem',
    'http://sns.us-east-1.amazonaws.com/cert.pem',
    'https://sns.us-east-1.amazonaws.com/cert.txt',
    'https://sns.us-east-1.amazonaws.com:8443/cert.pem',
    'not a url',
  ]) {
    const forged = signer.notification(TOPIC, record, { certUrl });
    await assertRejected(await post(signer.sign(forged, { certUrl, keyPem: forger.keyPem })), `cert URL ${certUrl}`);
  }
  assert.equal(signer.fetcher.certRequests.length, requestsBefore, 'no certificate is fetched from a URL that is not SNS');

  await assertRejected(await post(signer.notification('arn:aws:sns:us-east-1:123456789012:someone-elses', record)), 'unknown TopicArn');
  await assertRejected(await post(signer.notification(TOPIC, record, { certUrl: 'https://sns.us-east-1.amazonaws.com/missing.pem' })), 'certificate unreachable');
  // A real SNS host, but of another region than the topic's: a forger could run a topic there.
  signer.serveCert('https://sns.eu-west-1.amazonaws.com/other-region.pem', forger.certPem);
  const otherRegion = 'https://sns.eu-west-1.amazonaws.com/other-region.pem';
  await assertRejected(await post(signer.sign(signer.notification(TOPIC, record, { certUrl: otherRegion }), { certUrl: otherRegion, keyPem: forger.keyPem })), 'certificate of another region');

  for (const [what, body] of [
    ['not JSON', '{"Type": "Notification", '],
    ['empty body', ''],
    ['JSON array', '[]'],
    ['missing signature', JSON.stringify({ ...good, Signature: undefined })],
    ['unknown signature version', JSON.stringify({ ...good, SignatureVersion: '3' })],
    ['unknown type', JSON.stringify({ ...good, Type: 'Surprise' })],
  ] as const) {
    await assertRejected(await post(body), what);
  }
  assert.equal((await eventsOf(sql, t.projectId, email.id)).length, 0);

  const huge = await post({ ...good, Message: 'x'.repeat(257 * 1024) });
  assert.equal(huge.status, 413);
  assert.equal((await huge.json() as { error: { type: string } }).error.type, 'payload_too_large');
});

test('SubscriptionConfirmation is confirmed only after the signature verifies, and once', async () => {
  const confirmation = signer.subscriptionConfirmation(TOPIC, { version: '2' });
  await assertRejected(await post({ ...confirmation, Token: 'tampered' }), 'tampered confirmation');
  await assertRejected(await post(signer.subscriptionConfirmation('arn:aws:sns:us-east-1:123456789012:unknown')), 'unknown topic');
  const offHost = signer.subscriptionConfirmation(TOPIC, { subscribeUrl: 'https://evil.example/?Action=ConfirmSubscription' });
  await assertRejected(await post(offHost), 'SubscribeURL not on SNS');
  assert.deepEqual(signer.fetcher.confirmed, [], 'nothing unverified is visited');

  assert.equal((await post(confirmation)).status, 200);
  assert.equal((await post(confirmation)).status, 200);
  assert.deepEqual(signer.fetcher.confirmed, [confirmation.SubscribeURL]);

  const unsubscribe = signer.sign({ ...signer.subscriptionConfirmation(TOPIC), Type: 'UnsubscribeConfirmation' });
  assert.equal((await post(unsubscribe)).status, 200);
  assert.equal(signer.fetcher.confirmed.length, 1, 'an unsubscribe confirmation is not visited');
});

test('the route needs no API key, is mounted only for EVENT_INGESTION=https, and is not in the OpenAPI document', async () => {
  const res = await post(signer.notification(TOPIC, ses.open('x')));
  assert.equal(res.status, 200, 'verified by signature alone; an ignored SES type is acknowledged');

  const queueApp = createApp({ ...ctx.deps, config: { ...ctx.config, eventIngestion: 'queue' } });
  const notMounted = await post(signer.notification(TOPIC, ses.open('x')), queueApp);
  assert.equal(notMounted.status, 404);

  const doc = await (await ctx.app.request('/openapi.json')).json() as { paths: Record<string, unknown> };
  assert.ok(!Object.keys(doc.paths).some((p) => p.startsWith('/v1/events')));
});
