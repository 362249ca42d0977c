import { run, Logger as WorkerLogger } from 'graphile-worker';
import pg from 'pg';
import { createSql, type Sql } from '../src/platform/db.ts';
import { idFloor, newId } from '../src/platform/ids.ts';
import { createProject } from '../src/projects/service.ts';
import { insertQueuedEmails } from '../src/emails/queries.ts';
import { cpuDuring, mainThreadSchedule, QUICK, ratio, round, waitFinished, withWorkers, type BenchContext, type BenchResult } from './support.ts';

/**
 * Emails from `queued` to `sent` through the built-in sink (a project with no provider
 * connection), by one worker process at its default concurrency; against graphile-worker
 * running the same number of no-op jobs at the same concurrency. The clock starts when the
 * batch commits (the worker is already listening) and stops when the last one is `sent`.
 */
const CONCURRENCY = 8;
const EMAILS = QUICK ? 300 : 3000;
const WARMUP = QUICK ? 50 : 200;

async function enqueue(sql: Sql, projectId: string, count: number) {
  await sql.begin((tx) => insertQueuedEmails(tx, Array.from({ length: count }, () => ({
    id: newId('email'), projectId,
    from: 'Bench <bench@example.com>', to: ['reader@example.com'], cc: [], bcc: [], replyTo: [],
    subject: 'Your receipt', text: 'Thanks for your order. '.repeat(20), html: `<p>${'Thanks for your order. '.repeat(20)}</p>`,
    headers: {}, attachments: [],
  }))));
}

/**
 * Waits until `expectSent` emails of the project, all made since `since`, are `sent`; any failure
 * aborts the bench. The poll reads the project's event counters (a row per metric, day and
 * worker connection), which the sent record adds to in its own statement: reading the emails
 * instead planned over their partitions on every poll, PostgreSQL time taken from the worker it
 * measures. The final tally reads the emails themselves.
 */
async function waitSent(sql: Sql, projectId: string, since: number, expectSent: number) {
  const floor = idFloor('email', since);
  await waitFinished(`${expectSent} emails sent`, async () => {
    const [row] = await sql<[{ sent: number; failed: number }]>`
      select coalesce(sum(n) filter (where metric = 'email.sent'), 0)::int as sent,
             coalesce(sum(n) filter (where metric = 'email.failed'), 0)::int as failed
      from project_daily_counts where project_id = ${projectId}`;
    return row.sent < expectSent && row.failed === 0;
  }, async () => {
    const [row] = await sql<[{ sent: number; failed: number; lastError: string | null }]>`
      select count(*) filter (where status = 'sent')::int as sent, count(*) filter (where status = 'failed')::int as failed,
             max(last_error) as last_error
      from emails where project_id = ${projectId} and id >= ${floor}`;
    if (row.failed) throw new Error(`${row.failed} emails failed (${row.lastError})`);
    return row.sent >= expectSent;
  });
}

/** The same job count through a bare graphile-worker runner whose task does nothing. */
async function noopCeiling(databaseUrl: string, sql: Sql): Promise<number> {
  let done = 0;
  let target = WARMUP;
  let finished: () => void = () => {};
  // Our own pool, so it is fully closed before the database is dropped (the runner's own end is not awaited).
  const pgPool = new pg.Pool({ connectionString: databaseUrl, max: 10 }); // graphile-worker's default, as the worker process has
  pgPool.on('error', () => {});
  pgPool.on('connect', (client) => client.on('error', () => {}));
  const runner = await run({
    pgPool,
    concurrency: CONCURRENCY,
    noHandleSignals: true,
    pollInterval: 1000,
    logger: new WorkerLogger(() => (level, message) => { if (level === 'error') process.stderr.write(`noop runner: ${message}\n`); }),
    taskList: { noop: async () => { if (++done === target) finished(); } },
  });
  try {
    const batch = async (count: number) => {
      const all = new Promise<void>((resolve) => { finished = resolve; });
      target = done + count;
      await sql`select graphile_worker.add_job('noop', json_build_object('n', g), max_attempts := 25, job_key := 'noop-' || ${done}::int || '-' || g)
                from generate_series(1, ${count}::int) g`;
      const started = performance.now();
      await all;
      return (performance.now() - started) / 1000;
    };
    await batch(WARMUP);
    return EMAILS / (await batch(EMAILS));
  } finally {
    await runner.stop();
    await pgPool.end();
  }
}

/** `workers` worker processes, each at CONCURRENCY, drain a fresh project's backlog: the rate and who spent the CPU. */
async function drainWith(ctx: BenchContext, sql: Sql, workers: number) {
  const since = Date.now() - 1000;
  const project = await createProject(sql, `bench drain ×${workers}`);
  const env = () => ({ ...ctx.env, SINK_SMTP_PORT: '0', METRICS_PORT: '0', WORKER_CONCURRENCY: String(CONCURRENCY) });
  const { seconds, cpu, mainThread } = await withWorkers(workers, env, async (pids) => {
    await enqueue(sql, project.id, WARMUP);
    await waitSent(sql, project.id, since, WARMUP);
    // The clock and the CPU counters start once the batch has committed.
    await enqueue(sql, project.id, EMAILS);
    const names = Object.fromEntries(pids.map((pid, i) => [workers === 1 ? 'worker' : `worker${i + 1}`, pid]));
    const before = mainThreadSchedule(pids[0]!);
    const measured = await cpuDuring(names, () => waitSent(sql, project.id, since, WARMUP + EMAILS));
    const after = mainThreadSchedule(pids[0]!);
    return { ...measured, mainThread: { on_cpu_s: round(after.onCpu - before.onCpu, 2), waiting_for_cpu_s: round(after.waiting - before.waiting, 2) } };
  });
  const [{ caught }] = await sql<[{ caught: number }]>`select count(*)::int as caught from sink_messages where project_id = ${project.id}`;
  if (caught !== WARMUP + EMAILS) throw new Error(`the sink caught ${caught} messages, expected ${WARMUP + EMAILS}`);
  return { rate: round(EMAILS / seconds), cpu, mainThread };
}

export async function drain(ctx: BenchContext): Promise<BenchResult> {
  const sql = createSql(ctx.databaseUrl, { max: 2 });
  try {
    // A database in steady state holds a day partition for each day RETENTION_DAYS keeps (90 by
    // default), and every statement PostgreSQL plans afresh over emails plans over all of them.
    const days = Number(process.env.BENCH_PARTITION_DAYS ?? 90);
    await sql`select mailroom_ensure_partitions(current_date - ${days}::int, current_date)`;
    const [{ partitions }] = await sql<[{ partitions: number }]>`
      select count(*)::int as partitions from pg_inherits where inhparent = 'emails'::regclass`;
    const one = await drainWith(ctx, sql, 1);
    const two = await drainWith(ctx, sql, 2);

    const ceiling = await noopCeiling(ctx.databaseUrl, sql);
    return {
      bench: 'drain',
      rate_per_s: one.rate,
      ceiling: 'graphile-worker no-op jobs',
      ceiling_per_s: round(ceiling),
      ratio: ratio(one.rate, ceiling),
      emails: EMAILS,
      concurrency: CONCURRENCY,
      email_partitions: partitions,
      cpu_s: one.cpu,
      worker_main_thread: one.mainThread,
      two_workers_rate_per_s: two.rate,
      two_workers_cpu_s: two.cpu,
    };
  } finally {
    await sql.end();
  }
}
