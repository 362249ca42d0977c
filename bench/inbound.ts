import { loadConfig } from '../src/platform/config.ts';
import { createSql, type Sql } from '../src/platform/db.ts';
import { createProject } from '../src/projects/service.ts';
import { connectProvider } from '../src/providers/connections.ts';
import { createEndpoint } from '../src/webhooks/service.ts';
import { startFakeSqs } from '../test/helpers/fake-sqs.ts';
import { startFakeS3 } from '../test/helpers/fake-s3.ts';
import { snsEnvelope } from '../test/events/fixtures.ts';
import { receivedNotification, receivingDomain, replyMessage } from '../test/inbound/fixtures.ts';
import { cpuDuring, peakRssMb, QUICK, round, spawnMailroom, waitFinished, withWorker, type BenchContext, type BenchResult } from './support.ts';

/**
 * Inbound mail through one worker process: `Received` notifications on the fake SQS queue for
 * 50 KB messages on the fake S3, each fetched, parsed, stored and its `email.received` delivered
 * to a local receiver. The clock starts when the notifications are queued and stops when the last
 * delivery is `delivered`. Then one message just under 40 MiB (the default
 * INBOUND_MAX_MESSAGE_BYTES) goes the same way, and the worker's peak RSS is read from /proc.
 */
const MESSAGES = QUICK ? 200 : 1000;
const WARMUP = QUICK ? 30 : 100;
const LARGE_BYTES = 40 * 1024 * 1024 - 64 * 1024;
const DOMAIN = 'inbound.bench.test';

/** A reply with a binary attachment, about 50 KB in all as it travels (base64). */
const MESSAGE = replyMessage({ to: `support@${DOMAIN}`, pdf: Buffer.alloc(36 * 1024, 0x5a) }).raw;

/** A message of `total` bytes whose attachment is made line by line as it is read, never held whole. */
function* largeMessage(total: number): Generator<Buffer> {
  const head = Buffer.from([
    'From: Ann Example <ann@example.net>', `To: support@${DOMAIN}`, 'Subject: The scans', 'Message-ID: <large@example.net>',
    'MIME-Version: 1.0', 'Content-Type: multipart/mixed; boundary="b1"', '', '--b1', 'Content-Type: text/plain', '', 'Scans attached.',
    '--b1', 'Content-Type: application/octet-stream; name="scans.bin"', 'Content-Disposition: attachment; filename="scans.bin"',
    'Content-Transfer-Encoding: base64', '', '',
  ].join('\r\n'));
  const tail = Buffer.from('\r\n--b1--\r\n');
  const line = Buffer.from(`${Buffer.alloc(57, 0xa7).toString('base64')}\r\n`); // 78 bytes
  const block = Buffer.concat(Array.from({ length: 800 }, () => line));
  yield head;
  let left = total - head.length - tail.length;
  while (left >= block.length) { yield block; left -= block.length; }
  while (left >= line.length) { yield line; left -= line.length; }
  if (left > 0) yield Buffer.alloc(left, 0x41); // padding inside the base64 part: ignored letters of its last line
  yield tail;
}

async function counts(sql: Sql, projectId: string) {
  const [row] = await sql<[{ stored: number; delivered: number; failed: number }]>`
    select (select count(*)::int from received_emails where project_id = ${projectId}) as stored,
           (select count(*)::int from webhook_deliveries where project_id = ${projectId} and status = 'delivered') as delivered,
           (select count(*)::int from webhook_deliveries where project_id = ${projectId} and attempt_count > 0 and status <> 'delivered') as failed`;
  if (row.failed) throw new Error(`${row.failed} webhook deliveries did not succeed`);
  return row;
}

export async function inbound(ctx: BenchContext): Promise<BenchResult> {
  const sqs = await startFakeSqs({ closeAfterFile: false });
  const s3 = await startFakeS3({ closeAfterFile: false });
  const env = { ...ctx.env, NODE_ENV: 'development', SINK_SMTP_PORT: '0', METRICS_PORT: '0', AWS_ENDPOINT_URL_SQS: sqs.endpoint, AWS_ENDPOINT_URL_S3: s3.endpoint };
  const config = loadConfig(env, { requireRedis: false });
  const sql = createSql(ctx.databaseUrl, { max: 2 });
  const receiver = spawnMailroom('bench/receiver.ts', {});
  try {
    const { port } = await receiver.logLine('receiver listening');
    const project = await createProject(sql, 'bench inbound');
    const queueUrl = sqs.createQueue('ses-inbound-bench', { visibilitySeconds: 120 });
    await connectProvider(sql, config, { projectId: project.id, region: 'us-east-1', accessKeyId: 'AKIDBENCH', secretAccessKey: 'bench-secret', eventsQueueUrl: queueUrl });
    await receivingDomain(sql, project.id, DOMAIN);
    await createEndpoint(sql, config, project.id, `http://127.0.0.1:${port}/hook`);
    let sent = 0;
    const arrive = (n: number) => {
      for (let i = 0; i < n; i++, sent++) {
        const key = `mail/${sent}`;
        s3.put('inbound-mail', key, MESSAGE);
        sqs.send(queueUrl, snsEnvelope(receivedNotification({ messageId: `bench-${sent}`, recipients: [`support@${DOMAIN}`], action: { type: 'S3', bucket: 'inbound-mail', key } })));
      }
    };
    const done = (n: number) => async () => {
      const c = await counts(sql, project.id);
      return c.stored >= n && c.delivered >= n;
    };
    // Polled every 50 ms without loading the database measured: the queue is the bench's own, and
    // once it is empty only a lookup for a pending delivery runs; the counts run once a second.
    const busy = async () => sqs.remaining(queueUrl) > 0 || (await sql<[{ pending: boolean }]>`
      select exists (select 1 from webhook_deliveries where project_id = ${project.id} and status = 'pending') as pending`)[0].pending;
    const waitDone = (what: string, n: number) => waitFinished(what, busy, done(n), 300_000);
    /** When the last message was stored, by the database's clock, in ms since the epoch. */
    const lastStoredAt = async () => (await sql<[{ ms: number }]>`
      select extract(epoch from max(created_at)) * 1000 as ms from received_emails where project_id = ${project.id}`)[0].ms;

    const rate = await withWorker(env, async (pid) => {
      const idleRss = peakRssMb(pid);
      arrive(WARMUP);
      await waitDone('warm-up received', WARMUP);
      const started = performance.now();
      const startedAt = Date.now();
      const { cpu } = await cpuDuring({ worker: pid, receiver: receiver.pid }, async () => {
        arrive(MESSAGES);
        await waitDone(`${MESSAGES} received and delivered`, WARMUP + MESSAGES);
      });
      const seconds = (performance.now() - started) / 1000;
      return {
        rate_per_s: round(MESSAGES / seconds),
        stored_rate_per_s: round(MESSAGES / ((Number(await lastStoredAt()) - startedAt) / 1000)),
        cpu_s: cpu,
        worker_idle_rss_mb: idleRss,
        worker_peak_rss_mb_rate_phase: peakRssMb(pid),
      };
    });

    // The large message on a worker of its own, so its peak is what this message costs, not the
    // high-water mark the burst of small ones left.
    const large = await withWorker(env, async (pid) => {
      s3.putGenerated('inbound-mail', 'mail/large', LARGE_BYTES, () => largeMessage(LARGE_BYTES));
      sqs.send(queueUrl, snsEnvelope(receivedNotification({ messageId: 'bench-large', recipients: [`support@${DOMAIN}`], action: { type: 'S3', bucket: 'inbound-mail', key: 'mail/large' } })));
      const started = performance.now();
      await waitDone('the 40 MiB message received', WARMUP + MESSAGES + 1);
      const [row] = await sql<[{ size: number; tooLarge: boolean; attachments: { size: number }[] }]>`
        select raw_size::int as size, content_too_large as too_large, attachments from received_emails where project_id = ${project.id} and ses_message_id = 'bench-large'`;
      if (row.tooLarge || row.size !== LARGE_BYTES) throw new Error(`the large message was not parsed whole (${row.size} bytes, too large ${row.tooLarge})`);
      return { peak: peakRssMb(pid), seconds: round((performance.now() - started) / 1000), attachmentBytes: row.attachments[0]?.size ?? 0 };
    });
    return {
      bench: 'inbound',
      rate_per_s: rate.rate_per_s,
      large_message_worker_peak_rss_mb: large.peak,
      stored_rate_per_s: rate.stored_rate_per_s,
      messages: MESSAGES,
      message_bytes: MESSAGE.length,
      large_message_bytes: LARGE_BYTES,
      large_message_attachment_bytes: large.attachmentBytes,
      large_message_s: large.seconds,
      worker_idle_rss_mb: rate.worker_idle_rss_mb,
      worker_peak_rss_mb_rate_phase: rate.worker_peak_rss_mb_rate_phase,
      cpu_s: rate.cpu_s,
    };
  } finally {
    await receiver.stop();
    await sql.end();
    await sqs.close();
    await s3.close();
  }
}
