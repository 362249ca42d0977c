import { test } from 'node:test';
import assert from 'node:assert/strict';
import postgres from 'postgres';
import { createTestContext } from '../helpers/app.ts';
import { adminUrl } from '../helpers/db.ts';
import { startFakeSes } from '../helpers/fake-ses.ts';
import { testRedisUrl, REDIS_SKIP_REASON } from '../helpers/redis.ts';
import { waitFor } from '../helpers/wait.ts';
import { sinkWorkerEnv, startWorkerProcess, stopProcess } from '../helpers/worker-process.ts';
import { connectProvider } from '../../src/providers/connections.ts';
import { insertEmail } from './fixtures.ts';

const redisUrl = await testRedisUrl();
const ses = await startFakeSes();
const ctx = await createTestContext();
const dbName = new URL(ctx.url).pathname.slice(1);

test('SES accepts, and at that moment the worker\'s database connection is killed and the database refuses it: the email is sent once and ends sent with its message id', { skip: redisUrl ? false : REDIS_SKIP_REASON, timeout: 60_000 }, async () => {
  const { projectId } = await ctx.tenant('accepted-once');
  await connectProvider(ctx.sql, ctx.config, { projectId, region: 'eu-west-1', accessKeyId: 'AKIDONCE', secretAccessKey: 's', sendQuota: { maxSendRate: 100, max24HourSend: 50_000 } });
  const admin = postgres(adminUrl(), { max: 1, onnotice: () => {} });
  let faults = 0;
  // Right after SES accepted the first message and before it answers: every backend of the worker
  // is ended, and for 2 s the database takes no connection, as during a restart.
  ses.hooks.beforeAnswer = async () => {
    if (faults++ > 0) return;
    await admin.unsafe(`alter database "${dbName}" allow_connections false`);
    await admin`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${dbName} and application_name like 'mailroom-worker%'`;
    setTimeout(() => { admin.unsafe(`alter database "${dbName}" allow_connections true`).catch(() => {}); }, 2000);
  };
  const env = { ...await sinkWorkerEnv(ctx.url, redisUrl!), SINK_SMTP_PORT: '0', AWS_ENDPOINT_URL_SESV2: ses.url, WORKER_CONCURRENCY: '1', LOG_LEVEL: 'info' };
  const worker = startWorkerProcess(env, 'pipe');
  let log = '';
  worker.stdout!.on('data', (d: Buffer) => { log += d.toString(); });
  try {
    const id = await insertEmail(ctx.sql, projectId, { subject: 'Once' });
    await waitFor('SES to accept the email', async () => ses.accepted.length >= 1, 20_000, 10);
    // Through the outage and well past it, as long as a retry of the old code takes (lease, sweep and job).
    await new Promise((r) => setTimeout(r, 2000));
    const status = async () => {
      const [row] = await ctx.sql<[{ status: string; providerMessageId: string | null }]>`
        select status, provider_message_id from emails where id = ${id}`;
      return row;
    };
    await waitFor('the email to be recorded sent', async () => (await status().catch(() => undefined))?.status === 'sent', 20_000, 50);
    await new Promise((r) => setTimeout(r, 3000));
    const sends = ses.requests.filter((r) => r.raw.includes(id));
    assert.equal(faults >= 1, true, 'the fault was injected');
    assert.equal(sends.length, 1, `SES got the email once (${sends.length})`);
    const row = await status();
    assert.equal(row.status, 'sent');
    assert.match(row.providerMessageId ?? '', /^fake-ses-/, 'with the message id SES gave');
    const [events] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from events where email_id = ${id} and type = 'email.sent'`;
    assert.equal(events.n, 1);
    assert.equal(worker.exitCode, null, 'the worker is still up');
  } catch (err) {
    throw new Error(`${(err as Error).message}\n--- worker log\n${log.slice(-6000)}`);
  } finally {
    ses.hooks.beforeAnswer = undefined;
    await admin.unsafe(`alter database "${dbName}" allow_connections true`).catch(() => {});
    await admin.end();
    await stopProcess(worker);
  }
});
