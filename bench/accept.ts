import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Pool } from 'undici';
import { apiWithKey, cpuDuring, peakRssMb, percentile, rssMb, QUICK, ratio, round, type BenchContext, type BenchResult } from './support.ts';

/**
 * POST /v1/emails at 32 connections with no worker running, against pgbench doing the very
 * transaction the route commits (the email row and its `email__send` job) on 32 connections.
 * The API adds to that: HTTP, key lookup, the Redis rate limit, validation and MIME sizing.
 */
const CONCURRENCY = 32;
const REQUESTS = QUICK ? 500 : 6000;
const WARMUP = QUICK ? 100 : 500;
const PGBENCH_SECONDS = QUICK ? 3 : 10;

const EMAIL = {
  from: 'Bench <bench@example.com>',
  to: ['reader@example.com'],
  subject: 'Your receipt',
  text: 'Thanks for your order. '.repeat(20),
  html: `<p>${'Thanks for your order. '.repeat(20)}</p>`,
};

async function post(pool: Pool, key: string, total: number) {
  const body = JSON.stringify(EMAIL);
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const latencies: number[] = [];
  const failures = new Map<number, number>();
  let next = 0;
  const started = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < total) {
      next++;
      const t = performance.now();
      const res = await pool.request({ method: 'POST', path: '/v1/emails', headers, body });
      await res.body.dump();
      latencies.push(performance.now() - t);
      if (res.statusCode !== 201) failures.set(res.statusCode, (failures.get(res.statusCode) ?? 0) + 1);
    }
  }));
  const seconds = (performance.now() - started) / 1000;
  if (failures.size) throw new Error(`POST /v1/emails answered other than 201: ${JSON.stringify(Object.fromEntries(failures))}`);
  return { seconds, latencies: latencies.sort((a, b) => a - b) };
}

/**
 * One email per transaction (a row and its `add_job`), as a pgbench script: the ceiling of any
 * design that commits each request on its own. Ids are time-ordered like the API's ULIDs, so
 * both append to the primary key's index the same way.
 */
const PGBENCH_SCRIPT = `
BEGIN;
insert into emails (id, project_id, status, from_address, to_addresses, cc_addresses, bcc_addresses,
                    reply_to_addresses, subject, html, text, headers, attachments)
values ('email_' || lpad(to_hex((extract(epoch from clock_timestamp()) * 1000000)::bigint), 16, '0') || substr(md5(random()::text), 1, 10),
        :project, 'queued', :from,
        array[:to]::text[], '{}', '{}', '{}', :subject, :html, :text, '{}'::jsonb, '[]'::jsonb)
returning id \\gset
select graphile_worker.add_job('email__send', json_build_object('email_id', cast(:id as text), 'project_id', cast(:project as text)),
                               max_attempts := 25, job_key := cast(:id as text));
END;
`;

/**
 * The API's own batched statement (insertQueuedEmails: the rows and their jobs through one
 * add_jobs), :n emails a transaction: the ceiling of group commit at that batch size.
 */
const PGBENCH_BATCH_SCRIPT = `
with inserted as (
  insert into emails (id, project_id, status, from_address, to_addresses, cc_addresses, bcc_addresses,
                      reply_to_addresses, subject, html, text, headers, attachments)
  select 'email_' || lpad(to_hex((extract(epoch from clock_timestamp()) * 1000000)::bigint), 16, '0') || substr(md5(random()::text), 1, 10),
         :project, 'queued', :from, array[:to]::text[], '{}', '{}', '{}', :subject, :html, :text, '{}'::jsonb, '[]'::jsonb
  from generate_series(1, :n)
  returning id, project_id)
select count(*) from graphile_worker.add_jobs(array(
  select row('email__send', json_build_object('email_id', id, 'project_id', project_id), null, now(), 25, id, null, null)::graphile_worker.job_spec
  from inserted));
`;

async function pgbench(databaseUrl: string, projectId: string, opts: { script?: string; clients?: number; batch?: number } = {}) {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mailroom-bench-'));
  try {
    const script = path.join(dir, 'accept.sql');
    await writeFile(script, opts.script ?? PGBENCH_SCRIPT);
    const vars = { project: projectId, from: EMAIL.from, to: EMAIL.to[0]!, subject: EMAIL.subject, html: EMAIL.html, text: EMAIL.text, n: String(opts.batch ?? 1) };
    const args = ['-n', '-M', 'prepared', '-c', String(opts.clients ?? CONCURRENCY), '-j', '2', '-T', String(PGBENCH_SECONDS), '-f', script,
      ...Object.entries(vars).flatMap(([k, v]) => ['-D', `${k}=${v}`]), databaseUrl];
    const { stdout } = await promisify(execFile)(pgbenchBinary(), args, { maxBuffer: 1 << 20 });
    const tps = Number(/^tps = ([\d.]+)/m.exec(stdout)?.[1]);
    const latency = Number(/^latency average = ([\d.]+) ms/m.exec(stdout)?.[1]);
    const failed = Number(/^number of failed transactions: (\d+)/m.exec(stdout)?.[1] ?? 0);
    if (!tps || failed) throw new Error(`pgbench did not run cleanly:\n${stdout}`);
    return { tps, latency };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** pgbench on PATH (Debian's postgresql-client), else the one beside a PostgreSQL server install. */
function pgbenchBinary(): string {
  const onPath = (process.env.PATH ?? '').split(':').map((d) => path.join(d, 'pgbench')).find(existsSync);
  if (onPath) return onPath;
  const servers = existsSync('/usr/lib/postgresql') ? readdirSync('/usr/lib/postgresql').sort().reverse() : [];
  const found = servers.map((v) => `/usr/lib/postgresql/${v}/bin/pgbench`).find(existsSync);
  if (!found) throw new Error('pgbench not found: install postgresql-client');
  return found;
}

export async function accept(ctx: BenchContext): Promise<BenchResult> {
  const { sql, projectId, key, api } = await apiWithKey(ctx, 'bench accept');
  try {
    let run: Awaited<ReturnType<typeof post>>;
    let rss: number;
    let bootRss: number;
    let cpu: Record<string, number>;
    try {
      const { url } = await api.logLine('api listening');
      bootRss = rssMb(api.pid);
      const pool = new Pool(String(url), { connections: CONCURRENCY, pipelining: 1 });
      try {
        await post(pool, key, WARMUP);
        ({ result: run, cpu } = await cpuDuring({ api: api.pid }, () => post(pool, key, REQUESTS)));
        rss = peakRssMb(api.pid);
      } finally {
        await pool.close();
      }
    } finally {
      await api.stop();
    }
    const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from emails where project_id = ${projectId}`;
    if (n !== WARMUP + REQUESTS) throw new Error(`expected ${WARMUP + REQUESTS} emails, found ${n}`);

    // Rows committed together share their inserting transaction id: that is the batch size.
    const batches = await sql<{ size: number }[]>`select count(*)::int as size from emails where project_id = ${projectId} group by xmin::text order by 1`;
    const medianBatch = batches[Math.floor(batches.length / 2)]?.size ?? 1;

    // Each ceiling starts from the same empty tables.
    const empty = async () => {
      await sql`truncate emails cascade`;
      await sql`truncate graphile_worker._private_jobs`;
      await sql`vacuum analyze emails`;
    };
    await empty();
    const ceiling = await pgbench(ctx.databaseUrl, projectId);
    await empty();
    // As many clients as the API keeps batches in flight (GroupCommit's maxInFlight).
    const batched = await pgbench(ctx.databaseUrl, projectId, { script: PGBENCH_BATCH_SCRIPT, clients: 2, batch: medianBatch });

    const rate = REQUESTS / run.seconds;
    return {
      bench: 'accept',
      rate_per_s: round(rate),
      ceiling: 'pgbench insert+add_job',
      ceiling_per_s: round(ceiling.tps),
      ratio: ratio(rate, ceiling.tps),
      p50_ms: round(percentile(run.latencies, 50), 2),
      p99_ms: round(percentile(run.latencies, 99), 2),
      ceiling_latency_avg_ms: round(ceiling.latency, 2),
      median_batch: medianBatch,
      batched_ceiling: `pgbench the API's batched statement, ${medianBatch} emails a transaction, 2 clients`,
      batched_ceiling_per_s: round(batched.tps * medianBatch),
      batched_ratio: ratio(rate, batched.tps * medianBatch),
      api_rss_after_boot_mb: bootRss,
      api_peak_rss_mb: rss,
      cpu_s: cpu,
      requests: REQUESTS,
      concurrency: CONCURRENCY,
    };
  } finally {
    await sql.end();
  }
}
