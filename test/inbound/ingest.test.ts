import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startSqsPolling } from '../../src/events/sqs-poll.ts';
import { createLogger } from '../../src/platform/log.ts';
import { connectProvider } from '../../src/providers/connections.ts';
import { createTestContext } from '../helpers/app.ts';
import { startFakeSqs } from '../helpers/fake-sqs.ts';
import { startFakeS3 } from '../helpers/fake-s3.ts';
import { waitFor } from '../helpers/wait.ts';
import { activeEndpoint, snsEnvelope } from '../events/fixtures.ts';
import { receivedNotification, receivingDomain, replyMessage } from './fixtures.ts';

const sqs = await startFakeSqs();
const s3 = await startFakeS3();
const ctx = await createTestContext({
  env: { AWS_ENDPOINT_URL_SQS: sqs.endpoint, AWS_ENDPOINT_URL_S3: s3.endpoint, INBOUND_MAX_MESSAGE_BYTES: String(64 * 1024) },
});
const { sql, config } = ctx;
const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');
const FAST = { waitTimeSeconds: 1, refreshMs: 100, backoffBaseMs: 20, backoffMaxMs: 100 };

let n = 0;
async function receivingProject(domain: string) {
  const t = await ctx.tenant();
  const queueUrl = sqs.createQueue(`ses-inbound-${++n}`, { visibilitySeconds: 1 });
  await connectProvider(sql, config, {
    projectId: t.projectId, region: 'us-east-1', accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'test-secret',
    configurationSet: 'mailroom', eventsQueueUrl: queueUrl,
  });
  await receivingDomain(sql, t.projectId, domain);
  return { ...t, queueUrl };
}

async function drain(queueUrl: string, until?: () => Promise<boolean>) {
  const polling = await startSqsPolling({ config, sql, log }, FAST);
  try {
    await waitFor('queue drained', async () => sqs.remaining(queueUrl) === 0 && (!until || await until()));
  } finally {
    await polling.close();
  }
}

const received = (projectId: string) => sql<{ id: string; sesMessageId: string; receivedFor: string[]; subject: string; attachments: { filename: string; size: number }[]; contentTooLarge: boolean; verdicts: Record<string, string> }[]>`
  select id, ses_message_id, received_for, subject, attachments, content_too_large, verdicts from received_emails where project_id = ${projectId} order by id`;

test('an S3 action: fetched, parsed, stored once per project with email.received, then deleted from the queue', async () => {
  const t = await receivingProject('in1.acme.test');
  const endpointId = await activeEndpoint(sql, t.projectId);
  const { raw, pdf } = replyMessage({ to: 'support@in1.acme.test' });
  s3.put('inbound-mail', 'mail/obj-1', raw);
  const note = receivedNotification({ recipients: ['support@in1.acme.test', 'sales@IN1.acme.test'], action: { type: 'S3', bucket: 'inbound-mail', key: 'mail/obj-1' } });
  sqs.send(t.queueUrl, snsEnvelope(note));
  sqs.send(t.queueUrl, JSON.stringify(note)); // raw delivery, and SNS's at-least-once: the same message again
  await drain(t.queueUrl);

  const rows = await received(t.projectId);
  assert.equal(rows.length, 1, 'two recipients of one project and a repeat: one row');
  assert.equal(rows[0]!.sesMessageId, note.mail.messageId);
  assert.deepEqual(rows[0]!.receivedFor, ['support@in1.acme.test', 'sales@IN1.acme.test']);
  assert.equal(rows[0]!.subject, 'Re: Your order');
  assert.deepEqual(rows[0]!.attachments.map((a) => [a.filename, a.size]), [['invoice.pdf', pdf.length]]);
  assert.match(rows[0]!.id, /^rcv_[0-9A-Z]{26}$/);
  const events = await sql`select type, email_id, data from events where project_id = ${t.projectId}`;
  assert.deepEqual(events.map((e) => [e.type, e.emailId]), [['email.received', rows[0]!.id]]);
  assert.equal(events[0]!.data.subject, 'Re: Your order');
  assert.equal(events[0]!.data.raw, undefined);
  assert.equal(events[0]!.data.headers, undefined);
  assert.equal(events[0]!.data.content_truncated, false);
  assert.equal(events[0]!.data.stripped_text, 'Yes, please ship it.');
  const deliveries = await sql`select 1 from webhook_deliveries where project_id = ${t.projectId} and endpoint_id = ${endpointId}`;
  assert.equal(deliveries.length, 1);
});

test('a message for domains of two projects is stored once for each; a domain without receiving stores nothing', async () => {
  const a = await receivingProject('shared-a.acme.test');
  const b = await receivingProject('shared-b.acme.test');
  const { raw } = replyMessage({ to: 'x@shared-a.acme.test' });
  s3.put('inbound-mail', 'mail/obj-2', raw);
  sqs.send(a.queueUrl, snsEnvelope(receivedNotification({
    recipients: ['x@shared-a.acme.test', 'y@shared-b.acme.test', 'z@not-receiving.test'], action: { type: 'S3', bucket: 'inbound-mail', key: 'mail/obj-2' },
  })));
  await drain(a.queueUrl);
  assert.deepEqual((await received(a.projectId)).map((r) => r.receivedFor), [['x@shared-a.acme.test']]);
  assert.deepEqual((await received(b.projectId)).map((r) => r.receivedFor), [['y@shared-b.acme.test']]);
});

test('the queue message stays until the row commits: an S3 failure leaves it for the next receive', async () => {
  const t = await receivingProject('in3.acme.test');
  const note = receivedNotification({ recipients: ['a@in3.acme.test'], action: { type: 'S3', bucket: 'inbound-mail', key: 'mail/not-yet' } });
  sqs.send(t.queueUrl, snsEnvelope(note));
  const polling = await startSqsPolling({ config, sql, log }, FAST);
  try {
    await waitFor('a failed fetch', () => sqs.calls.filter((c) => c.op === 'ReceiveMessage' && c.queueUrl === t.queueUrl && c.count).length >= 1);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(sqs.remaining(t.queueUrl), 1, 'not deleted while the object cannot be read');
    assert.equal((await received(t.projectId)).length, 0);
    s3.put('inbound-mail', 'mail/not-yet', replyMessage({ to: 'a@in3.acme.test' }).raw);
    await waitFor('stored after the object appears', async () => (await received(t.projectId)).length === 1 && sqs.remaining(t.queueUrl) === 0, 10_000);
  } finally {
    await polling.close();
  }
});

test('an SNS action: the message is decoded from content and kept inline', async () => {
  const t = await receivingProject('in4.acme.test');
  const { raw } = replyMessage({ to: 'a@in4.acme.test', subject: 'Inline' });
  sqs.send(t.queueUrl, snsEnvelope(receivedNotification({ recipients: ['a@in4.acme.test'], action: { type: 'SNS', content: raw } })));
  await drain(t.queueUrl);
  const [row] = await sql`select subject, raw, s3_bucket from received_emails where project_id = ${t.projectId}`;
  assert.equal(row!.subject, 'Inline');
  assert.deepEqual(row!.raw, raw);
  assert.equal(row!.s3Bucket, null);
});

test('past INBOUND_MAX_MESSAGE_BYTES the message is stored from the notification\'s headers, content_too_large', async () => {
  const t = await receivingProject('in5.acme.test');
  const big = replyMessage({ to: 'a@in5.acme.test', pdf: Buffer.alloc(100 * 1024, 7) }).raw;
  s3.put('inbound-mail', 'mail/big', big);
  sqs.send(t.queueUrl, snsEnvelope(receivedNotification({
    recipients: ['a@in5.acme.test'], subject: 'Large', action: { type: 'S3', bucket: 'inbound-mail', key: 'mail/big' },
  })));
  await drain(t.queueUrl);
  const [row] = await sql`select subject, content_too_large, attachments, raw_size, text from received_emails where project_id = ${t.projectId}`;
  assert.equal(row!.subject, 'Large');
  assert.equal(row!.contentTooLarge, true);
  assert.deepEqual(row!.attachments, []);
  assert.equal(Number(row!.rawSize), big.length);
  assert.equal(row!.text, null);
});

test('verdicts are lower-cased; a notification nobody receives for is dropped, not retried', async () => {
  const t = await receivingProject('in6.acme.test');
  s3.put('inbound-mail', 'mail/v', replyMessage({ to: 'a@in6.acme.test' }).raw);
  sqs.send(t.queueUrl, snsEnvelope(receivedNotification({
    recipients: ['a@in6.acme.test'], action: { type: 'S3', bucket: 'inbound-mail', key: 'mail/v' },
    verdicts: { spf: 'GRAY', dkim: 'FAIL', dmarc: 'PROCESSING_FAILED', spam: 'PASS', virus: 'DISABLED' },
  })));
  sqs.send(t.queueUrl, snsEnvelope(receivedNotification({ recipients: ['a@nobody.test'], action: { type: 'S3', bucket: 'inbound-mail', key: 'mail/v' } })));
  await drain(t.queueUrl);
  const rows = await received(t.projectId);
  assert.equal(rows.length, 1);
  assert.deepEqual(rows[0]!.verdicts, { spf: 'gray', dkim: 'fail', dmarc: 'processing_failed', spam: 'pass', virus: 'disabled' });
});
