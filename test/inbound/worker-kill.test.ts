import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connectProvider } from '../../src/providers/connections.ts';
import { createTestContext } from '../helpers/app.ts';
import { startFakeSqs } from '../helpers/fake-sqs.ts';
import { startFakeS3 } from '../helpers/fake-s3.ts';
import { sinkWorkerEnv, startWorkerProcess, stopProcess } from '../helpers/worker-process.ts';
import { testRedisUrl, REDIS_SKIP_REASON } from '../helpers/redis.ts';
import { waitFor } from '../helpers/wait.ts';
import { snsEnvelope } from '../events/fixtures.ts';
import { receivedNotification, receivingDomain, replyMessage } from './fixtures.ts';

const redisUrl = await testRedisUrl();
const sqs = await startFakeSqs();
const s3 = await startFakeS3();
const ctx = await createTestContext();
const { sql, config } = ctx;

const TOTAL = 300;
const KILLS = 5;

test('five worker SIGKILLs while 300 messages arrive: none lost, none stored twice', { skip: redisUrl ? false : REDIS_SKIP_REASON, timeout: 120_000 }, async () => {
  const t = await ctx.tenant();
  // A short visibility timeout: what a killed worker had received comes back within seconds.
  const queueUrl = sqs.createQueue('ses-inbound-kill', { visibilitySeconds: 2 });
  await connectProvider(sql, config, {
    projectId: t.projectId, region: 'us-east-1', accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'test-secret', eventsQueueUrl: queueUrl,
  });
  await receivingDomain(sql, t.projectId, 'kill.acme.test');
  const env = {
    ...await sinkWorkerEnv(ctx.url, redisUrl!),
    AWS_ENDPOINT_URL_SQS: sqs.endpoint,
    AWS_ENDPOINT_URL_S3: s3.endpoint,
  };

  let sent = 0;
  const arrive = (n: number) => {
    for (let i = 0; i < n && sent < TOTAL; i++, sent++) {
      const key = `mail/kill-${sent}`;
      s3.put('inbound-mail', key, replyMessage({ to: 'a@kill.acme.test', subject: `n${sent}` }).raw);
      sqs.send(queueUrl, snsEnvelope(receivedNotification({ messageId: `kill-${sent}`, recipients: ['a@kill.acme.test'], action: { type: 'S3', bucket: 'inbound-mail', key } })));
    }
  };
  const stored = async () => {
    const [row] = await sql<[{ n: number }]>`select count(*)::int as n from received_emails where project_id = ${t.projectId}`;
    return row.n;
  };

  let worker = startWorkerProcess(env);
  for (let kill = 0; kill < KILLS; kill++) {
    arrive(TOTAL / (KILLS + 1));
    // Killed while it is in the middle of the messages: after it has stored some of this round's.
    const floor = await stored();
    await waitFor('the worker storing', async () => (await stored()) > floor, 30_000, 20);
    await stopProcess(worker, 'SIGKILL');
    worker = startWorkerProcess(env);
  }
  arrive(TOTAL);
  try {
    await waitFor('every message stored and the queue empty', async () => (await stored()) === TOTAL && sqs.remaining(queueUrl) === 0, 60_000, 100);
  } finally {
    await stopProcess(worker, 'SIGTERM');
  }

  const rows = await sql<{ sesMessageId: string; n: number }[]>`
    select ses_message_id, count(*)::int as n from received_emails where project_id = ${t.projectId} group by 1`;
  assert.equal(rows.length, TOTAL, 'none lost');
  assert.ok(rows.every((r) => r.n === 1), 'none stored twice');
  const [events] = await sql<[{ n: number; distinct: number }]>`
    select count(*)::int as n, count(distinct email_id)::int as distinct from events where project_id = ${t.projectId} and type = 'email.received'`;
  assert.deepEqual({ ...events }, { n: TOTAL, distinct: TOTAL }, 'one email.received each');
  assert.ok(sqs.calls.filter((c) => c.op === 'ReceiveMessage' && c.queueUrl === queueUrl && c.count).reduce((s, c) => s + c.count!, 0) > TOTAL,
    'some messages were received again after a kill');
});
