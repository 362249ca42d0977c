import { appendFileSync } from 'node:fs';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startPrivatePostgres } from '../helpers/private-pg.ts';
import { startFakeSes } from '../helpers/fake-ses.ts';
import { spawnEntry } from '../helpers/process.ts';
import { testRedisUrl, REDIS_SKIP_REASON } from '../helpers/redis.ts';
import { waitFor } from '../helpers/wait.ts';
import { TEST_SECRET_KEY } from '../helpers/app.ts';
import { freePort, sinkWorkerEnv, startWorkerProcess, stopProcess } from '../helpers/worker-process.ts';
import { createSql } from '../../src/platform/db.ts';
import { createProject } from '../../src/projects/service.ts';
import { createApiKey } from '../../src/keys/service.ts';
import { connectProvider } from '../../src/providers/connections.ts';
import { insertQueuedEmails, type NewEmail } from '../../src/emails/queries.ts';
import { newId } from '../../src/platform/ids.ts';
import type { Config } from '../../src/platform/config.ts';

const redisUrl = await testRedisUrl();

/** For a failure: what the database says of the emails not sent, each with its job, if any. */
async function unsentState(sql: ReturnType<typeof createSql>): Promise<string> {
  try {
    const rows = await Promise.race([
      sql`
        select e.status, e.attempt_count, e.lease_owner, case when isfinite(e.lease_expires_at) then round(extract(epoch from e.lease_expires_at - now()))::int end as lease_left_s,
          j.locked_by, round(extract(epoch from j.run_at - now()))::int as run_in_s, j.attempts, left(j.last_error, 80) as last_error
        from emails e left join graphile_worker.jobs j on j.key = e.id
        where e.status <> 'sent' order by e.id limit 40`,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no answer within 5 s')), 5000)),
    ]);
    const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from emails where status <> 'sent'`;
    const heartbeats = await sql`select pool_id, ended_at is not null as ended, round(extract(epoch from now() - last_seen_at))::int as silent_s from worker_heartbeats order by last_seen_at desc limit 12`;
    return `${n} unsent\n${rows.map((r) => JSON.stringify(r)).join('\n')}\n--- heartbeats\n${heartbeats.map((r) => JSON.stringify(r)).join('\n')}`;
  } catch (err) {
    return `could not read: ${(err as Error).message}`;
  }
}
const TOTAL = 1000;
const RESTARTS = 3;

test('PostgreSQL restarted three times while 1,000 emails drain through SES: none is sent twice, and the API and both workers stay up and carry on within 5 s each time', { skip: redisUrl ? false : REDIS_SKIP_REASON, timeout: 120_000 }, async () => {
  const server = await startPrivatePostgres();
  const url = await server.createDatabase('mailroom');
  const ses = await startFakeSes();
  ses.quota.maxSendRate = 50;
  const sql = createSql(url, { max: 2, appName: 'restart-test' });
  // The test's own reads go through the restarts too: each is tried again until the server answers.
  const retry = async <T>(read: () => Promise<T>): Promise<T> => {
    for (;;) {
      try { return await read(); } catch { await new Promise((r) => setTimeout(r, 50)); }
    }
  };
  const sentCount = () => retry(async () => (await sql<[{ n: number }]>`select count(*)::int as n from emails where status = 'sent'`)[0].n);

  const project = await createProject(sql, 'restart');
  const key = await createApiKey(sql, project.id, 'restart key');
  await connectProvider(sql, { secretKey: TEST_SECRET_KEY } as Config, {
    projectId: project.id, region: 'eu-west-1', accessKeyId: 'AKIDRESTART', secretAccessKey: 's', sendQuota: { maxSendRate: 50, max24HourSend: 1_000_000 },
  });

  const env = { ...await sinkWorkerEnv(url, redisUrl!), SINK_SMTP_PORT: '0', AWS_ENDPOINT_URL_SESV2: ses.url, WORKER_CONCURRENCY: '8', LOG_LEVEL: 'info' };
  const workers = [startWorkerProcess(env, 'pipe'), startWorkerProcess(env, 'pipe')];
  const logs = workers.map(() => '');
  workers.forEach((w, i) => w.stdout!.on('data', (d: Buffer) => {
    logs[i] = (logs[i] + d.toString()).slice(-200_000);
    // For looking into a failure: the workers' whole logs, written where this names.
    if (process.env.RESTART_TEST_LOG_DIR) appendFileSync(`${process.env.RESTART_TEST_LOG_DIR}/worker-${i}.log`, d);
  }));
  const api = spawnEntry('src/api.ts', { DATABASE_URL: url, SECRET_KEY: TEST_SECRET_KEY, REDIS_URL: redisUrl!, PORT: String(await freePort()), HOST: '127.0.0.1', LOG_LEVEL: 'info' });
  const apiUrl = String((await api.logLine('api listening', 60_000)).url);
  const apiServes = async () => {
    try {
      const res = await fetch(`${apiUrl}/v1/emails?limit=1`, { headers: { authorization: `Bearer ${key.key}` }, signal: AbortSignal.timeout(1000) });
      return res.status === 200;
    } catch {
      return false;
    }
  };
  const up = () => ({ api: api.child.exitCode === null, workers: workers.map((w) => w.exitCode === null) });

  try {
    const emails: NewEmail[] = Array.from({ length: TOTAL }, (_, i) => ({
      id: newId('email'), projectId: project.id, from: 'Sender <sender@example.com>', to: [`to${i}@example.net`], cc: [], bcc: [], replyTo: [],
      subject: `Restart ${i}`, html: '<p>Hi</p>', text: 'Hi', headers: {}, attachments: [],
    }));
    await insertQueuedEmails(sql, emails);
    await waitFor('sending to start', async () => (await sentCount()) >= 50, 30_000, 20);

    const recoveries: { apiMs: number; workersMs: number }[] = [];
    for (let round = 0; round < RESTARTS; round++) {
      await server.stop();
      await new Promise((r) => setTimeout(r, 1000));
      await server.start();
      const back = Date.now();
      await waitFor(`the API to serve after restart ${round + 1}`, apiServes, 5000, 25);
      const apiMs = Date.now() - back;
      const before = await sentCount();
      await waitFor(`the workers to send again after restart ${round + 1}`, async () => (await sentCount()) > before, 5000 - (Date.now() - back), 25);
      recoveries.push({ apiMs, workersMs: Date.now() - back });
      assert.deepEqual(up(), { api: true, workers: [true, true] }, `every process stayed up through restart ${round + 1}`);
      await new Promise((r) => setTimeout(r, 1500));
    }
    assert.ok((await sentCount()) < TOTAL, 'the restarts landed while emails were still draining');
    await waitFor('every email to be sent', async () => (await sentCount()) === TOTAL, 60_000, 100);

    // Duplicates at SES: the Message-ID carries the email id, stable across attempts.
    const perEmail = new Map<string, number>();
    ses.requests.forEach((r, i) => {
      void i;
      const id = /^Message-ID: <([^@>]+)@/im.exec(r.raw)?.[1] ?? '?';
      perEmail.set(id, (perEmail.get(id) ?? 0) + 1);
    });
    const accepted = ses.accepted.length;
    const duplicates = accepted - perEmail.size;
    process.stdout.write(`# ${RESTARTS} PostgreSQL restarts during a ${TOTAL}-email drain: ${accepted} accepted at SES for ${perEmail.size} emails, duplicates ${duplicates}, throttles ${ses.stats.throttled}; recovery after each restart ${JSON.stringify(recoveries)}\n`);
    assert.equal(perEmail.size, TOTAL);
    const twice = [...perEmail].filter(([, n]) => n > 1).map(([id]) => id);
    // For looking into a failure: every line either worker logged about an email sent twice.
    const about = (id: string) => logs.flatMap((l, i) => l.split('\n').filter((line) => line.includes(id)).map((line) => `worker ${i}: ${line.slice(0, 300)}`));
    assert.equal(duplicates, 0, `no email was sent twice (${twice.join(', ')})\n${twice.flatMap(about).join('\n')}`);
    const [events] = await sql<[{ n: number }]>`select count(*)::int as n from events where type = 'email.sent'`;
    assert.equal(events.n, TOTAL, 'one email.sent event an email');
    const [noId] = await sql<[{ n: number }]>`select count(*)::int as n from emails where provider_message_id is null`;
    assert.equal(noId.n, 0);

    // The orderly stop still works after the restarts.
    await Promise.all(workers.map((w) => stopProcess(w)));
    api.child.kill('SIGTERM');
    assert.deepEqual([...workers.map((w) => w.exitCode), await api.exited], [0, 0, 0]);
  } catch (err) {
    // What each worker did last, without the lines every outage repeats.
    const serious = (l: string) => l.split('\n').filter((line) => line.startsWith('{') && !/notify listener|UNLISTEN|connection lost|heartbeat failed|"level":20/.test(line))
      .map((line) => line.slice(0, 220)).slice(-50).join('\n');
    throw new Error(`${(err as Error).message}\n--- worker errors\n${logs.map(serious).join('\n---\n')}\n--- unsent emails and their jobs\n${await unsentState(sql)}\n--- failed on: ${(err as Error).message.split('\n')[0]}`);
  } finally {
    for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
    // SIGTERM, so the API stops in order and closes its connections.
    if (api.child.exitCode === null) { api.child.kill('SIGTERM'); await Promise.race([api.exited, new Promise((r) => setTimeout(r, 12_000))]); }
    await sql.end({ timeout: 1 });
    await ses.close();
  }
});
