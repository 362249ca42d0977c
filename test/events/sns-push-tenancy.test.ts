import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connectProvider } from '../../src/providers/connections.ts';
import { createTestContext } from '../helpers/app.ts';
import { startFakeS3 } from '../helpers/fake-s3.ts';
import { createSnsSigner } from '../helpers/sns-signer.ts';
import { activeEndpoint, eventsOf, sentEmail, ses } from './fixtures.ts';
import { receivedNotification, receivingDomain, replyMessage } from '../inbound/fixtures.ts';

/**
 * §22.2 on the HTTPS push path: a topic speaks for the connections naming it, and for their SES
 * accounts only. A and B trust one topic on one account; H trusts another topic on another.
 */
const s3 = await startFakeS3();
const ctx = await createTestContext({ env: { EVENT_INGESTION: 'https', PUBLIC_BASE_URL: 'https://mail.example.test', AWS_ENDPOINT_URL_S3: s3.endpoint } });
const signer = createSnsSigner();
ctx.deps.snsFetch = signer.fetcher;
const { sql } = ctx;

const SHARED = 'arn:aws:sns:us-east-1:123456789012:shared-events';
const OTHER = 'arn:aws:sns:us-east-1:210987654321:other-events';

async function project(accessKeyId: string, topic: string, domain: string) {
  const t = await ctx.tenant();
  await connectProvider(sql, ctx.config, { projectId: t.projectId, region: 'us-east-1', accessKeyId, secretAccessKey: 'test-secret', snsTopicArn: topic });
  await receivingDomain(sql, t.projectId, domain); // bucket inbound-mail, prefix mail/
  await activeEndpoint(sql, t.projectId);
  return t;
}
const a = await project('AKIDPUSHONE', SHARED, 'a.push.test');
const b = await project('AKIDPUSHONE', SHARED, 'b.push.test');
const h = await project('AKIDPUSHTWO', OTHER, 'h.push.test');

function post(body: unknown) {
  return ctx.app.request('/v1/events/ses', {
    method: 'POST',
    headers: { 'content-type': 'text/plain; charset=UTF-8', 'x-amz-sns-message-type': 'Notification' },
    body: JSON.stringify(body),
  });
}

function received(id: string, to: string, key = `mail/${id}`, bucket = 'inbound-mail') {
  s3.put(bucket, key, replyMessage({ to }).raw);
  return receivedNotification({ messageId: id, recipients: [to], action: { type: 'S3', bucket, key }, verdicts: { spf: 'PASS', dkim: 'PASS', dmarc: 'PASS' } });
}

const stored = async (projectId: string) =>
  (await sql<{ sesMessageId: string }[]>`select ses_message_id from received_emails where project_id = ${projectId} order by id`).map((r) => r.sesMessageId);
const deliveries = async (projectId: string) => (await sql`select 1 from webhook_deliveries where project_id = ${projectId}`).length;

test('a Received notification pushed by a topic is stored for a project of the topic\'s SES account, once', async () => {
  const note = received('push-own-1', 'x@b.push.test');
  const msg = signer.notification(SHARED, note);
  assert.equal((await post(msg)).status, 200);
  assert.equal((await post(msg)).status, 200, 'SNS\'s retry');
  assert.deepEqual(await stored(b.projectId), ['push-own-1']);
  assert.equal(await deliveries(b.projectId), 1);
  const [row] = await sql`select verdicts from received_emails where project_id = ${b.projectId}`;
  assert.equal(row!.verdicts.spf, 'pass');
});

test('a topic of one SES account cannot store mail for a project on another, nor from another bucket or prefix', async () => {
  assert.equal((await post(signer.notification(SHARED, received('push-cross-1', 'ceo@h.push.test')))).status, 200);
  assert.equal((await post(signer.notification(OTHER, received('push-bucket-1', 'ceo@h.push.test', 'mail/push-bucket-1', 'attacker-bucket')))).status, 200);
  assert.equal((await post(signer.notification(OTHER, received('push-prefix-1', 'ceo@h.push.test', 'other/push-prefix-1')))).status, 200);
  assert.deepEqual(await stored(h.projectId), []);
  assert.equal(await deliveries(h.projectId), 0);
  // H's own topic, with H's set-up, is heard.
  assert.equal((await post(signer.notification(OTHER, received('push-h-1', 'ceo@h.push.test')))).status, 200);
  assert.deepEqual(await stored(h.projectId), ['push-h-1']);
});

test('a sending event on a topic several projects trust reaches the project whose email it is', async () => {
  const email = await sentEmail(sql, b.projectId, ['ann@example.net']);
  assert.equal((await post(signer.notification(SHARED, ses.delivery(email.providerMessageId, ['ann@example.net'])))).status, 200);
  assert.deepEqual((await eventsOf(sql, b.projectId, email.id)).map((e) => e.type), ['email.delivered']);
  const [none] = await sql<[{ n: number }]>`select count(*)::int as n from events where project_id = ${a.projectId}`;
  assert.equal(none.n, 0);
});
