import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { apiWithKey, cpuDuring, mainThreadSchedule, MissingTool, ownTiming, peakRssMb, rssMb, runtimeFigures, QUICK, ratio, round, type BenchContext, type BenchResult } from './support.ts';

/**
 * POST /v1/emails at 32 connections with no worker running, against pgbench doing the very
 * transaction the route commits (the email row and its `email__send` job) on 32 connections.
 * The API adds to that: HTTP, key lookup, the Redis rate limit, validation and MIME sizing.
 */
export const CONCURRENCY = 32;
const P99_GOAL_MS = 25;
const SECONDS = QUICK ? 2 : 4;
const WARMUP_SECONDS = 1;
const PGBENCH_SECONDS = QUICK ? 3 : 10;

export const EMAIL = {
  from: 'Bench <bench@example.com>',
  to: ['reader@example.com'],
  subject: 'Your receipt',
  text: 'Thanks for your order. '.repeat(20),
  html: `<p>${'Thanks for your order. '.repeat(20)}</p>`,
};

/**
 * The same message from a published template of three variables (CONTRACT §8): what rendering at
 * accept costs, the version compiled once and cached, one lookup of the published version a send.
 */
const TEMPLATE = {
  name: 'Bench receipt',
  alias: 'bench-receipt',
  from: EMAIL.from,
  subject: 'Your receipt {{order}}',
  text: 'Thanks for your order, {{name}}. '.repeat(20) + 'Total {{total}}.',
  html: `<p>${'Thanks for your order, {{name}}. '.repeat(20)}Total {{total}}.</p>`,
  variables: [{ key: 'name', type: 'string' }, { key: 'order', type: 'string' }, { key: 'total', type: 'number' }],
};
const TEMPLATED_EMAIL = { to: EMAIL.to, template: { id: TEMPLATE.alias, variables: { name: 'Ann', order: 'A-1042', total: 42.5 } } };

export type WrkRun = {
  requests: number;
  seconds: number;
  p50Ms: number;
  p99Ms: number;
  /** CPU seconds of the wrk process: the load's own cost, beside the API's. */
  cpuSeconds: number;
};

/**
 * The load is wrk, a C client on one thread, so the figure and its tail are the API's. An undici
 * loop in this Node process cost 0.16 ms of CPU a request on the same two cores, and against a
 * bare node:http server that answers at once it peaked at 9.3k requests/s with p99 23–26 ms,
 * where wrk reached 30k/s with p99 3–7 ms: at p99, a Node client measures itself.
 * wrk keeps each of its 32 connections busy for `seconds` and reports only completed requests.
 */
export async function wrk(url: string, key: string, seconds: number, body: unknown = EMAIL): Promise<WrkRun> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mailroom-bench-'));
  try {
    const script = path.join(dir, 'accept.lua');
    // Lua long brackets hold the JSON body verbatim; the key is base64url.
    await writeFile(script, `
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer ${key}"
wrk.body = [==[${JSON.stringify(body)}]==]
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK {"requests":%d,"duration_us":%d,"failed":%d,"p50_us":%d,"p99_us":%d}\\n',
    summary.requests, summary.duration, e.status + e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
`);
    // bash's `times` prints the CPU its children used: wrk's own.
    const { stdout, stderr } = await promisify(execFile)('bash', ['-c', '"$@"; times', 'bash', wrkBinary(), '-t1', `-c${CONCURRENCY}`, `-d${seconds}s`, '--timeout', '10s',
      '-s', script, new URL('/v1/emails', url).href], { maxBuffer: 1 << 20 });
    const line = /^WRK (.*)$/m.exec(stdout)?.[1];
    if (!line) throw new Error(`wrk printed no summary:\n${stdout}${stderr}`);
    const out = JSON.parse(line) as { requests: number; duration_us: number; failed: number; p50_us: number; p99_us: number };
    if (out.failed) throw new Error(`${out.failed} of wrk's requests failed or were answered other than 2xx:\n${stdout}`);
    const children = stdout.trim().split('\n').at(-1)!.split(/\s+/).map((t) => {
      const m = /^(\d+)m([\d.]+)s$/.exec(t);
      return m ? Number(m[1]) * 60 + Number(m[2]) : NaN;
    });
    return {
      requests: out.requests,
      seconds: out.duration_us / 1e6,
      p50Ms: out.p50_us / 1000,
      p99Ms: out.p99_us / 1000,
      cpuSeconds: round(children[0]! + children[1]!, 2),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * One email per transaction (a row and its `add_job`), as a pgbench script: the ceiling of any
 * design that commits each request on its own. Ids are ULIDs made in the statement, like the
 * API's, so both land in the day's partition and append to its primary key the same way.
 */
const PGBENCH_SCRIPT = `
BEGIN;
insert into emails (id, project_id, status, from_address, to_addresses, cc_addresses, bcc_addresses,
                    reply_to_addresses, subject, html, text, headers, attachments)
values (mailroom_new_id('email_'),
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
  select mailroom_new_id('email_'),
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

/** wrk on PATH (Debian's wrk). */
export function wrkBinary(): string {
  const found = (process.env.PATH ?? '').split(':').map((d) => path.join(d, 'wrk')).find(existsSync);
  if (!found) throw new MissingTool('wrk', 'wrk');
  return found;
}

/** pgbench on PATH (Debian's postgresql-client), else the one beside a PostgreSQL server install. */
function pgbenchBinary(): string {
  const onPath = (process.env.PATH ?? '').split(':').map((d) => path.join(d, 'pgbench')).find(existsSync);
  if (onPath) return onPath;
  const servers = existsSync('/usr/lib/postgresql') ? readdirSync('/usr/lib/postgresql').sort().reverse() : [];
  const found = servers.map((v) => `/usr/lib/postgresql/${v}/bin/pgbench`).find(existsSync);
  if (!found) throw new MissingTool('pgbench', 'postgresql-client');
  return found;
}

export async function accept(ctx: BenchContext): Promise<BenchResult> {
  const { sql, projectId, key, api } = await apiWithKey(ctx, 'bench accept');
  try {
    let run: WrkRun;
    let warmup: WrkRun;
    let rss: number;
    let bootRss: number;
    let cpu: Record<string, number>;
    let mainThread: Record<string, unknown>;
    let templated: WrkRun;
    let templatedWarmup: WrkRun;
    try {
      const { url } = await api.logLine('api listening');
      bootRss = rssMb(api.pid);
      warmup = await wrk(String(url), key, WARMUP_SECONDS);
      const metricsUrl = new URL('/metrics', String(url)).href;
      const runtimeBefore = await runtimeFigures(metricsUrl);
      const scheduleBefore = mainThreadSchedule(api.pid);
      ({ result: run, cpu } = await cpuDuring({ api: api.pid }, () => wrk(String(url), key, SECONDS)));
      const scheduleAfter = mainThreadSchedule(api.pid);
      const runtimeAfter = await runtimeFigures(metricsUrl);
      cpu.load = run.cpuSeconds;
      const own = ownTiming(runtimeBefore, runtimeAfter, P99_GOAL_MS / 1000);
      mainThread = {
        on_cpu_s: round(scheduleAfter.onCpu - scheduleBefore.onCpu, 2),
        waiting_for_cpu_s: round(scheduleAfter.waiting - scheduleBefore.waiting, 2),
        gc_pause_s: Object.fromEntries(Object.entries(runtimeAfter.gcSeconds)
          .map(([kind, total]) => [kind, round(total - (runtimeBefore.gcSeconds[kind] ?? 0), 3)])),
        // The API's own timing of the same sends: when it stays under the goal, the tail is outside the process.
        own_p99_at_most_ms: own.p99AtMostMs,
        own_over_25ms_share: own.overShare,
        event_loop_delay_p99_ms: round(runtimeAfter.loopDelayP99Ms, 1),
        event_loop_delay_max_ms: round(runtimeAfter.loopDelayMaxMs, 1),
      };
      // The templated variant, on the same process right after: create and publish, warm the cache, measure.
      const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      const made = await fetch(new URL('/v1/templates', String(url)), { method: 'POST', headers, body: JSON.stringify(TEMPLATE) });
      if (made.status !== 201) throw new Error(`template create answered ${made.status}: ${await made.text()}`);
      const published = await fetch(new URL(`/v1/templates/${TEMPLATE.alias}/publish`, String(url)), { method: 'POST', headers });
      if (published.status !== 200) throw new Error(`template publish answered ${published.status}`);
      templatedWarmup = await wrk(String(url), key, WARMUP_SECONDS, TEMPLATED_EMAIL);
      templated = await wrk(String(url), key, SECONDS, TEMPLATED_EMAIL);
      rss = peakRssMb(api.pid);
    } finally {
      await api.stop();
    }
    // wrk stops with up to one request a connection unanswered; the API may still commit those.
    const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from emails where project_id = ${projectId}`;
    const answered = warmup.requests + run.requests + templatedWarmup.requests + templated.requests;
    if (n < answered || n > answered + 4 * CONCURRENCY) throw new Error(`expected ${answered} emails (up to ${4 * CONCURRENCY} more), found ${n}`);
    const [{ t }] = await sql<[{ t: number }]>`select count(*)::int as t from emails where project_id = ${projectId} and template_version = 1`;
    if (t < templatedWarmup.requests + templated.requests) throw new Error(`expected ${templatedWarmup.requests + templated.requests} templated emails, found ${t}`);

    // Rows committed together share their inserting transaction id: that is the batch size.
    const batches = await sql<{ size: number }[]>`select count(*)::int as size from emails where project_id = ${projectId} and template_id is null group by xmin::text order by 1`;
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

    const rate = run.requests / run.seconds;
    return {
      bench: 'accept',
      rate_per_s: round(rate),
      ceiling: 'pgbench insert+add_job',
      ceiling_per_s: round(ceiling.tps),
      ratio: ratio(rate, ceiling.tps),
      p50_ms: round(run.p50Ms, 2),
      p99_ms: round(run.p99Ms, 2),
      templated_rate_per_s: round(templated.requests / templated.seconds),
      templated_ratio_to_plain: ratio(templated.requests / templated.seconds, rate),
      templated_p99_ms: round(templated.p99Ms, 2),
      ceiling_latency_avg_ms: round(ceiling.latency, 2),
      median_batch: medianBatch,
      batched_ceiling: `pgbench the API's batched statement, ${medianBatch} emails a transaction, 2 clients`,
      batched_ceiling_per_s: round(batched.tps * medianBatch),
      batched_ratio: ratio(rate, batched.tps * medianBatch),
      api_rss_after_boot_mb: bootRss,
      api_peak_rss_mb: rss,
      cpu_s: cpu,
      api_main_thread: mainThread,
      requests: run.requests,
      concurrency: CONCURRENCY,
      load: `wrk, 1 thread, ${CONCURRENCY} connections, ${SECONDS} s after ${WARMUP_SECONDS} s of warm-up`,
    };
  } finally {
    await sql.end();
  }
}
