import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { startSqsPolling } from '../../src/events/sqs-poll.ts';
import { connectProvider } from '../../src/providers/connections.ts';
import { createTestContext } from '../helpers/app.ts';
import { startFakeSqs } from '../helpers/fake-sqs.ts';
import { startFakeS3 } from '../helpers/fake-s3.ts';
import { waitFor } from '../helpers/wait.ts';
import { activeEndpoint, snsEnvelope } from '../events/fixtures.ts';
import { receivedNotification, receivingDomain, replyMessage } from './fixtures.ts';

/**
 * §22.2: a queue speaks only for its connection's SES account (access key id and region), and a
 * Received notification only for the bucket and prefix its domain's receiving set-up named.
 * Projects A and B share one SES account; H is on another.
 */
const sqs = await startFakeSqs();
const s3 = await startFakeS3();
const ctx = await createTestContext({ env: { AWS_ENDPOINT_URL_SQS: sqs.endpoint, AWS_ENDPOINT_URL_S3: s3.endpoint } });
const { sql, config } = ctx;
const FAST = { waitTimeSeconds: 1, refreshMs: 100, backoffBaseMs: 20, backoffMaxMs: 100 };

const warnings: { msg: string; [k: string]: unknown }[] = [];
const log = pino({ level: 'warn' }, { write: (line: string) => { warnings.push(JSON.parse(line)); } });

let n = 0;
async function project(accessKeyId: string, domain: string) {
  const t = await ctx.tenant();
  const queueUrl = sqs.createQueue(`tenancy-${++n}`, { visibilitySeconds: 1 });
  await connectProvider(sql, config, {
    projectId: t.projectId, region: 'us-east-1', accessKeyId, secretAccessKey: 'test-secret', eventsQueueUrl: queueUrl,
  });
  await receivingDomain(sql, t.projectId, domain); // bucket inbound-mail, prefix mail/
  const endpointId = await activeEndpoint(sql, t.projectId);
  return { ...t, queueUrl, endpointId, domain };
}

const a = await project('AKIDACCOUNTONE', 'a.tenancy.test');
const b = await project('AKIDACCOUNTONE', 'b.tenancy.test');
const h = await project('AKIDACCOUNTTWO', 'h.tenancy.test');

async function drain(...queueUrls: string[]) {
  const polling = await startSqsPolling({ config, sql, log }, FAST);
  try {
    await waitFor('queues drained', async () => queueUrls.every((q) => sqs.remaining(q) === 0), 15_000);
  } finally {
    await polling.close();
  }
}

const rows = async (projectId: string) => [...await sql<{ sesMessageId: string; receivedFor: string[]; verdicts: Record<string, string> }[]>`
  select ses_message_id, received_for, verdicts from received_emails where project_id = ${projectId} order by id`];
const deliveries = async (projectId: string) =>
  (await sql`select 1 from webhook_deliveries where project_id = ${projectId}`).length;

function notify(queueUrl: string, opts: { id: string; to: string; bucket?: string; key?: string }) {
  const key = opts.key ?? `mail/${opts.id}`;
  s3.put(opts.bucket ?? 'inbound-mail', key, replyMessage({ to: opts.to }).raw);
  sqs.send(queueUrl, snsEnvelope(receivedNotification({
    messageId: opts.id, recipients: [opts.to], action: { type: 'S3', bucket: opts.bucket ?? 'inbound-mail', key },
    verdicts: { spf: 'PASS', dkim: 'PASS', dmarc: 'PASS', spam: 'PASS', virus: 'PASS' },
  })));
}

test('a notification on a queue of one SES account naming a domain of a project on another is stored nowhere, fires nothing, and is dropped with one warning', async () => {
  warnings.length = 0;
  notify(a.queueUrl, { id: 'cross-account-1', to: 'ceo@h.tenancy.test' });
  await drain(a.queueUrl);
  assert.deepEqual(await rows(h.projectId), [], 'nothing stored in the other account\'s project');
  assert.deepEqual(await rows(a.projectId), []);
  assert.equal(await deliveries(h.projectId), 0, 'no email.received for the other account\'s project');
  const [{ n: anywhere }] = await sql<[{ n: number }]>`select count(*)::int as n from received_emails where ses_message_id = 'cross-account-1'`;
  assert.equal(anywhere, 0);
  const dropped = warnings.filter((w) => w.sesMessageId === 'cross-account-1');
  assert.equal(dropped.length, 1, 'one warning line');
  assert.match(dropped[0]!.msg, /dropped/);
});

test('a notification naming a project on the same SES account is stored there, with its verdicts and email.received', async () => {
  notify(a.queueUrl, { id: 'same-account-1', to: 'ops@b.tenancy.test' });
  notify(h.queueUrl, { id: 'own-queue-1', to: 'ceo@h.tenancy.test' });
  await drain(a.queueUrl, h.queueUrl);
  const [row] = await rows(b.projectId);
  assert.equal(row?.sesMessageId, 'same-account-1');
  assert.deepEqual(row.receivedFor, ['ops@b.tenancy.test']);
  assert.deepEqual(row.verdicts, { spf: 'pass', dkim: 'pass', dmarc: 'pass', spam: 'pass', virus: 'pass' });
  assert.equal(await deliveries(b.projectId), 1);
  assert.deepEqual((await rows(h.projectId)).map((r) => r.sesMessageId), ['own-queue-1'], 'a project\'s own queue still speaks for it');
});

test('a notification whose S3 bucket or prefix is not the one the domain\'s receiving set-up named is dropped', async () => {
  warnings.length = 0;
  notify(h.queueUrl, { id: 'other-bucket-1', to: 'ceo@h.tenancy.test', bucket: 'attacker-bucket', key: 'mail/other-bucket-1' });
  notify(h.queueUrl, { id: 'other-prefix-1', to: 'ceo@h.tenancy.test', key: 'elsewhere/other-prefix-1' });
  await drain(h.queueUrl);
  const ids = (await rows(h.projectId)).map((r) => r.sesMessageId);
  assert.ok(!ids.includes('other-bucket-1'), 'another bucket: not stored');
  assert.ok(!ids.includes('other-prefix-1'), 'another prefix: not stored');
  assert.equal(s3.gets.filter((g) => g.key.includes('other-')).length, 0, 'nothing fetched for them');
  for (const id of ['other-bucket-1', 'other-prefix-1']) {
    assert.equal(warnings.filter((w) => w.sesMessageId === id).length, 1, `one warning for ${id}`);
  }
});

test('an SNS action notification follows the same account rule', async () => {
  const inline = (queueUrl: string, id: string, to: string) => sqs.send(queueUrl, snsEnvelope(receivedNotification({
    messageId: id, recipients: [to], action: { type: 'SNS', content: replyMessage({ to }).raw },
  })));
  inline(h.queueUrl, 'sns-cross-1', 'ops@b.tenancy.test');
  inline(b.queueUrl, 'sns-same-1', 'x@a.tenancy.test');
  await drain(h.queueUrl, b.queueUrl);
  assert.deepEqual((await rows(b.projectId)).map((r) => r.sesMessageId).filter((id) => id.startsWith('sns-')), []);
  assert.deepEqual((await rows(a.projectId)).map((r) => r.sesMessageId), ['sns-same-1']);
});
