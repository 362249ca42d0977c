import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { after } from 'node:test';
import { createTestContext, TEST_SECRET_KEY } from '../helpers/app.ts';
import { testRedisUrl, REDIS_SKIP_REASON } from '../helpers/redis.ts';
import { waitFor } from '../helpers/wait.ts';
import { insertEmail } from './fixtures.ts';

const redisUrl = await testRedisUrl();
const ctx = await createTestContext();

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const children = new Set<ChildProcess>();
after(() => { for (const child of children) child.kill('SIGKILL'); });

/** The production worker entry point as its own process (one process, so SIGKILL is a real crash). */
function startWorkerProcess(env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/worker.ts'], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => { stderr += d.toString(); });
  child.on('exit', (code, signal) => {
    children.delete(child);
    if (code && signal === null) process.stderr.write(`# worker exited ${code}: ${stderr.slice(0, 2000)}\n`);
  });
  children.add(child);
  return child;
}

const countBy = async (projectId: string) => {
  const rows = await ctx.sql<{ status: string; n: number }[]>`
    select status, count(*)::int as n from emails where project_id = ${projectId} group by status`;
  return Object.fromEntries(rows.map((r) => [r.status, r.n])) as Record<string, number>;
};

test('a worker killed with SIGKILL mid-batch loses nothing: after a restart every email is sent', { skip: redisUrl ? false : REDIS_SKIP_REASON, timeout: 90_000 }, async () => {
  const { projectId } = await ctx.tenant('crash');
  const total = 40;
  const ids: string[] = [];
  for (let i = 0; i < total; i++) ids.push(await insertEmail(ctx.sql, projectId, { subject: `Batch ${i}` }));

  const env = {
    DATABASE_URL: ctx.url,
    SECRET_KEY: TEST_SECRET_KEY,
    REDIS_URL: redisUrl!,
    LOG_LEVEL: 'silent',
    SINK_SMTP_HOST: '127.0.0.1',
    SINK_SMTP_PORT: String(await freePort()),
    WORKER_CONCURRENCY: '4',
    WORKER_DEAD_AFTER_SECONDS: '3',
    EMAIL_RETRY_BASE_MS: '100',
  };
  const first = startWorkerProcess(env);
  await waitFor('the first worker to start sending', async () => ((await countBy(projectId)).sent ?? 0) >= 3, 30_000, 10);
  first.kill('SIGKILL');
  await new Promise((resolve) => (first.exitCode !== null || first.signalCode !== null ? resolve(null) : first.once('exit', resolve)));
  const atCrash = await countBy(projectId);
  assert.ok((atCrash.sent ?? 0) < total, `the kill landed mid-batch (${JSON.stringify(atCrash)})`);

  const second = startWorkerProcess(env);
  await waitFor('every email to be sent after the restart', async () => (await countBy(projectId)).sent === total, 45_000, 100);
  second.kill('SIGTERM');
  await new Promise((resolve) => (second.exitCode !== null || second.signalCode !== null ? resolve(null) : second.once('exit', resolve)));

  // Each email has exactly one `sent` transition; a message cut off mid-SMTP may be caught twice (at least once).
  const events = await ctx.sql<{ emailId: string; n: number }[]>`
    select email_id, count(*)::int as n from events
    where project_id = ${projectId} and type = 'email.sent' group by email_id`;
  assert.equal(events.length, total);
  assert.ok(events.every((e) => e.n === 1));
  const [caught] = await ctx.sql<[{ n: number }]>`
    select count(distinct email_id)::int as n from sink_messages where project_id = ${projectId}`;
  assert.equal(caught.n, total, 'the sink caught every email');
  const [left] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from graphile_worker.jobs where task_identifier = 'email__send'`;
  assert.equal(left.n, 0, 'no email__send job is left behind');
});
