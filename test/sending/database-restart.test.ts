import { appendFileSync } from 'node:fs';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { testRedisUrl, REDIS_SKIP_REASON } from '../helpers/redis.ts';
import { waitFor } from '../helpers/wait.ts';
import { insertEmail } from './fixtures.ts';
import { sinkWorkerEnv, startWorkerProcess, stopProcess } from '../helpers/worker-process.ts';
import { createSql } from '../../src/platform/db.ts';

const redisUrl = await testRedisUrl();
const ctx = await createTestContext();

test('a worker whose connections the server ends mid-batch, as a restart or failover does, sends everything and stays up', { skip: redisUrl ? false : REDIS_SKIP_REASON, timeout: 180_000 }, async () => {
  const { projectId } = await ctx.tenant('restart');
  // The test's own queries go through a pool the terminations spare.
  const admin = createSql(ctx.url, { max: 2, appName: 'restart-test-admin' });
  const countBy = async () => {
    const rows = await admin<{ status: string; n: number }[]>`
      select status, count(*)::int as n from emails where project_id = ${projectId} group by status`;
    return Object.fromEntries(rows.map((r) => [r.status, r.n])) as Record<string, number>;
  };
  // What a timeout reports: where each unsent email and its job stand, and what the worker said.
  const unsentState = async () => {
    const emails = await admin`
      select id, status, attempt_count, lease_owner, lease_expires_at, last_error from emails
      where project_id = ${projectId} and status <> 'sent' order by id`;
    const jobs = await admin`select * from graphile_worker.jobs order by id`;
    return [
      `now ${new Date().toISOString()}, worker exits: ${exits.join(', ') || 'none'}`,
      '--- unsent emails', ...emails.map((row) => JSON.stringify(row)),
      '--- jobs', ...jobs.map((row) => JSON.stringify(row)),
      '--- worker log, last 12 000 characters', workerLog.slice(-12_000),
    ].join('\n');
  };
  let workerLog = '';
  const exits: Array<number | null> = [];
  let stopped = false;
  try {
    const total = 60;
    for (let i = 0; i < total; i++) await insertEmail(ctx.sql, projectId, { subject: `Restart ${i}` });
    // The sink on a port of its own choosing: a port picked in advance can be taken meanwhile.
    const env = { ...await sinkWorkerEnv(ctx.url, redisUrl!), SINK_SMTP_PORT: '0', LOG_LEVEL: 'info' };
    // The supervisor: a worker that exits with an error is started again, as compose's
    // `restart: unless-stopped` does.
    const start = () => {
      const child = startWorkerProcess(env, 'pipe');
      child.stdout!.on('data', (d: Buffer) => {
        workerLog = (workerLog + d.toString()).slice(-50_000);
        // For looking into a failure: the worker's whole log, written where this names.
        if (process.env.RESTART_TEST_LOG_DIR) appendFileSync(`${process.env.RESTART_TEST_LOG_DIR}/database-restart-worker.log`, d);
      });
      return child;
    };
    let worker = start();
    const supervise = (child: typeof worker) => child.once('exit', (code) => {
      exits.push(code);
      if (code !== 0 && !stopped) supervise(worker = start());
    });
    supervise(worker);
    await waitFor('the worker to start sending', async () => ((await countBy()).sent ?? 0) >= 3, 30_000, 10);

    // Every connection of the worker ends, three times over, while it sends.
    let ended = 0;
    let atFirstEnd: Record<string, number> = {};
    for (let round = 0; round < 3; round++) {
      const rows = await admin<{ ended: boolean }[]>`
        select pg_terminate_backend(pid) as ended from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid() and application_name <> 'restart-test-admin'`;
      ended += rows.filter((r) => r.ended).length;
      if (round === 0) atFirstEnd = await countBy();
      await new Promise((r) => setTimeout(r, 300));
    }
    assert.ok(ended >= 3, `connections were ended (${ended})`);
    assert.ok((atFirstEnd.sent ?? 0) < total, `the terminations landed mid-batch (${JSON.stringify(atFirstEnd)})`);

    // An email whose attempt was cut short where it could not give its lease up is tried again once
    // the give-up is made; at worst, when its lease runs out after 45 s.
    await waitFor('every email to be sent', async () => (await countBy()).sent === total, 120_000, 100).catch(async (err: Error) => {
      throw new Error(`${err.message}\n${await unsentState().catch((e: Error) => `(no state: ${e.message})`)}`);
    });
    stopped = true;
    await stopProcess(worker);
    assert.deepEqual(exits.slice(0, -1), [], 'the worker rode through the terminations without exiting');

    const events = await admin<{ n: number }[]>`
      select count(*)::int as n from events where project_id = ${projectId} and type = 'email.sent' group by email_id`;
    assert.equal(events.length, total);
    assert.ok(events.every((e) => e.n === 1), 'one email.sent event an email');
  } finally {
    stopped = true;
    await admin.end({ timeout: 1 });
  }
});
