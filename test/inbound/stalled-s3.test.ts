import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startSqsPolling } from '../../src/events/sqs-poll.ts';
import { createLogger } from '../../src/platform/log.ts';
import { connectProvider, getProviderConnection } from '../../src/providers/connections.ts';
import { s3ObjectStore } from '../../src/providers/s3.ts';
import { createTestContext } from '../helpers/app.ts';
import { startFakeSqs } from '../helpers/fake-sqs.ts';
import { startFakeS3 } from '../helpers/fake-s3.ts';
import { sinkWorkerEnv, startWorkerProcess, stopProcess } from '../helpers/worker-process.ts';
import { testRedisUrl, REDIS_SKIP_REASON } from '../helpers/redis.ts';
import { waitFor } from '../helpers/wait.ts';
import { sentEmail, ses, snsEnvelope } from '../events/fixtures.ts';
import { receivedNotification, receivingDomain, replyMessage } from './fixtures.ts';

/**
 * §22.3: S3 answering headers and then nothing costs its own message only. The bounces and
 * complaints behind it on the same queue are recorded within 60 s, the stalled message comes
 * back through SQS visibility and is stored once S3 answers, and SIGTERM stops the worker
 * within 30 s with the read in flight.
 */
const redisUrl = await testRedisUrl();
const sqs = await startFakeSqs();
const s3 = await startFakeS3();
const ctx = await createTestContext({ env: { AWS_ENDPOINT_URL_SQS: sqs.endpoint, AWS_ENDPOINT_URL_S3: s3.endpoint } });
const { sql, config } = ctx;
const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');

let n = 0;
async function project(domain: string) {
  const t = await ctx.tenant();
  const queueUrl = sqs.createQueue(`stall-${++n}`, { visibilitySeconds: 2 });
  await connectProvider(sql, config, {
    projectId: t.projectId, region: 'us-east-1', accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'test-secret', eventsQueueUrl: queueUrl,
  });
  await receivingDomain(sql, t.projectId, domain);
  return { ...t, queueUrl };
}

/** A received message whose S3 object stalls after its headers, already being read. */
async function stalledInFlight(queueUrl: string, domain: string, id: string, withinMs = 15_000) {
  const key = `mail/${id}`;
  s3.put('inbound-mail', key, replyMessage({ to: `a@${domain}`, subject: 'Stalled' }).raw);
  s3.stall('inbound-mail', key);
  sqs.send(queueUrl, snsEnvelope(receivedNotification({ messageId: id, recipients: [`a@${domain}`], action: { type: 'S3', bucket: 'inbound-mail', key } })));
  await waitFor('the stalled read in flight', () => s3.gets.some((g) => g.key === key), withinMs);
  return key;
}

/** Bounces and complaints queued behind the stall; answers when every one is recorded. */
async function eventsBehind(projectId: string, queueUrl: string, count: number) {
  const emails = [];
  for (let i = 0; i < count; i++) {
    const email = await sentEmail(sql, projectId, [`r${i}@example.net`]);
    emails.push(email);
    sqs.send(queueUrl, snsEnvelope(i % 2 ? ses.complaint(email.providerMessageId, [`r${i}@example.net`]) : ses.bounce(email.providerMessageId, 'Permanent', [`r${i}@example.net`])));
  }
  return async () => {
    const [row] = await sql<[{ n: number }]>`
      select count(*)::int as n from events where project_id = ${projectId} and type in ('email.bounced', 'email.complained')`;
    return row.n === count;
  };
}

const storedIds = async (projectId: string) =>
  (await sql<{ sesMessageId: string }[]>`select ses_message_id from received_emails where project_id = ${projectId}`).map((r) => r.sesMessageId);

// The two that wait out real deadlines run together. The worker process of the SIGTERM test polls
// every connected queue, so it runs apart, after them.
describe('real deadlines', { concurrency: true }, () => {
  test('a stalled S3 read holds only its own message: bounces and complaints behind it are recorded, and it is stored once S3 answers', { timeout: 150_000 }, async (tc) => {
    const t = await project('stall.acme.test');
    // The real deadlines: 10 s for the headers, 30 s of silence in the body.
    const polling = await startSqsPolling({ config, sql, log }, { waitTimeSeconds: 1, refreshMs: 100, backoffBaseMs: 20, backoffMaxMs: 100 });
    try {
      const key = await stalledInFlight(t.queueUrl, 'stall.acme.test', 'stalled-1');
      const stalledAt = Date.now();
      const recorded = await eventsBehind(t.projectId, t.queueUrl, 12);
      await waitFor('bounces and complaints recorded behind the stall', recorded, 60_000, 50);
      assert.ok(Date.now() - stalledAt < 60_000, `recorded ${Date.now() - stalledAt} ms after the stall began`);
      tc.diagnostic(`bounces and complaints recorded ${Date.now() - stalledAt} ms after the stall began`);
      assert.deepEqual(await storedIds(t.projectId), [], 'the stalled message is not stored yet');
      assert.equal(sqs.remaining(t.queueUrl), 1, 'and it is still in the queue');

      s3.unstall('inbound-mail', key);
      // The stalled read ends at its 30 s idle deadline; the message comes back after its visibility.
      await waitFor('the stalled message stored once S3 answers', async () => (await storedIds(t.projectId)).includes('stalled-1') && sqs.remaining(t.queueUrl) === 0, 60_000, 100);
    } finally {
      await polling.close();
    }
  });

  test('S3 GetObject gives up at its deadlines: 10 s for the headers, 30 s of silence in the body', { timeout: 120_000 }, async () => {
    const t = await project('deadline.acme.test');
    const conn = (await getProviderConnection(sql, config, t.projectId))!;
    const store = s3ObjectStore(config, conn);
    s3.put('inbound-mail', 'mail/no-headers', Buffer.from('never sent'));
    s3.stall('inbound-mail', 'mail/no-headers', 'headers');
    s3.put('inbound-mail', 'mail/no-body', Buffer.from('never sent'));
    s3.stall('inbound-mail', 'mail/no-body');

    const [headers, body] = await Promise.all([
      (async () => {
        const started = Date.now();
        const err = await store.open('inbound-mail', 'mail/no-headers').then(() => undefined, (e: Error) => e);
        return { err, took: Date.now() - started };
      })(),
      (async () => {
        const object = await store.open('inbound-mail', 'mail/no-body');
        const started = Date.now();
        const err = await (async () => { for await (const _ of object.body) { /* nothing comes */ } })().then(() => undefined, (e: Error) => e);
        return { err, took: Date.now() - started };
      })(),
    ]);
    assert.equal(headers.err?.name, 'TimeoutError', String(headers.err));
    assert.ok(headers.took >= 9_500 && headers.took < 15_000, `headers gave up after ${headers.took} ms`);
    assert.ok(body.err, 'the body read ends in an error');
    assert.ok(body.took >= 29_000 && body.took < 40_000, `the body gave up after ${body.took} ms of silence`);
  });
});

test('SIGTERM stops the worker within 30 s with a stalled S3 read in flight, after recording the bounces behind it', { skip: redisUrl ? false : REDIS_SKIP_REASON, timeout: 150_000 }, async (tc) => {
  const t = await project('term.acme.test');
  const env = {
    ...await sinkWorkerEnv(ctx.url, redisUrl!),
    AWS_ENDPOINT_URL_SQS: sqs.endpoint,
    AWS_ENDPOINT_URL_S3: s3.endpoint,
    LOG_LEVEL: 'warn',
  };
  const worker = startWorkerProcess(env, 'pipe');
  let out = '';
  worker.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
  try {
    // The worker process starts first: compiling and connecting take a while on a busy machine.
    await stalledInFlight(t.queueUrl, 'term.acme.test', 'term-1', 90_000);
    const recorded = await eventsBehind(t.projectId, t.queueUrl, 6);
    await waitFor('bounces and complaints recorded by the worker behind the stall', recorded, 60_000, 50);
  } finally {
    const started = Date.now();
    await stopProcess(worker, 'SIGTERM');
    const took = Date.now() - started;
    tc.diagnostic(`the worker stopped ${took} ms after SIGTERM`);
    assert.ok(took < 30_000, `stopped in ${took} ms`);
  }
  assert.equal(worker.exitCode, 0);
  assert.doesNotMatch(out, /"step":"sqs-poll"[^\n]*did not finish/, 'the poll stopped on its own, not abandoned at the shutdown budget');
  assert.deepEqual(await storedIds(t.projectId), []);
  assert.equal(sqs.remaining(t.queueUrl), 1, 'the stalled message is left in the queue, not lost');
});
