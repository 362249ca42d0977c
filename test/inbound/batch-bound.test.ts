import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startSqsPolling } from '../../src/events/sqs-poll.ts';
import { createLogger } from '../../src/platform/log.ts';
import { connectProvider } from '../../src/providers/connections.ts';
import { createTestContext } from '../helpers/app.ts';
import { startFakeSqs } from '../helpers/fake-sqs.ts';
import { startFakeS3 } from '../helpers/fake-s3.ts';
import { waitFor } from '../helpers/wait.ts';
import { snsEnvelope } from '../events/fixtures.ts';
import { receivedNotification, receivingDomain, replyMessage } from './fixtures.ts';

/**
 * §22.4: an SQS batch of ten large received messages is never read and parsed all at once. The
 * poller fetches four at a time (the MIME pool parses two of those), so at most four of the
 * objects' bodies are ever being read from S3 together, and all ten are stored.
 */
const sqs = await startFakeSqs();
const s3 = await startFakeS3();
const ctx = await createTestContext({ env: { AWS_ENDPOINT_URL_SQS: sqs.endpoint, AWS_ENDPOINT_URL_S3: s3.endpoint } });
const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');

test('ten 6 MiB received messages in one SQS batch: at most four read from S3 at once, each stored once', { timeout: 120_000 }, async () => {
  const t = await ctx.tenant('batch');
  const domain = 'batch.acme.test';
  const queueUrl = sqs.createQueue('batch-bound', { visibilitySeconds: 120 });
  await connectProvider(ctx.sql, ctx.config, {
    projectId: t.projectId, region: 'us-east-1', accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'test-secret', eventsQueueUrl: queueUrl,
  });
  await receivingDomain(ctx.sql, t.projectId, domain);
  // A 4.5 MiB attachment is 6 MiB of base64: large enough that a read outlasts its neighbours' starts.
  const raw = replyMessage({ to: `a@${domain}`, pdf: Buffer.alloc(4.5 * 1024 * 1024, 0x41) }).raw;
  for (let i = 0; i < 10; i++) {
    s3.put('inbound-mail', `mail/batch-${i}`, raw);
    sqs.send(queueUrl, snsEnvelope(receivedNotification({ messageId: `batch-${i}`, recipients: [`a@${domain}`], action: { type: 'S3', bucket: 'inbound-mail', key: `mail/batch-${i}` } })));
  }
  const polling = await startSqsPolling({ config: ctx.config, sql: ctx.sql, log }, { waitTimeSeconds: 1, refreshMs: 100 });
  try {
    await waitFor('the ten stored', async () => {
      const [row] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from received_emails where project_id = ${t.projectId}`;
      return row.n === 10 && sqs.remaining(queueUrl) === 0;
    }, 90_000, 100);
  } finally {
    await polling.close();
  }
  assert.ok(s3.reading.peak >= 2, `reads overlap (peak ${s3.reading.peak})`);
  assert.ok(s3.reading.peak <= 4, `at most four objects read at once (peak ${s3.reading.peak})`);
  const [stored] = await ctx.sql<[{ n: number; ids: number }]>`
    select count(*)::int as n, count(distinct ses_message_id)::int as ids from received_emails where project_id = ${t.projectId}`;
  assert.deepEqual({ ...stored }, { n: 10, ids: 10 });
});
