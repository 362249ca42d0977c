import { loadConfig } from '../src/platform/config.ts';
import { createSql, type Sql } from '../src/platform/db.ts';
import { newId } from '../src/platform/ids.ts';
import { connectProvider, disconnectProvider } from '../src/providers/connections.ts';
import { startFakeSes } from '../test/helpers/fake-ses.ts';
import { apiWithKey, cpuDuring, QUICK, round, sleep, waitUntil, withWorker, type BenchContext, type BenchResult } from './support.ts';

/**
 * A broadcast to RECIPIENTS contacts, in two phases, by one worker process.
 *
 * Through SES at a 200/s account rate (a protocol-level fake that throttles as SES does, the
 * project connected with that quota, so the worker's pacing holds every send to it): the p99 from
 * accept to SES's answer of transactional mail sent with no broadcast (alone), and while the
 * broadcast drains (during). Both on the database's clock: created_at, set at accept, to sent_at,
 * recorded once SES has answered. The broadcast is canceled once the measurement is done:
 * draining it whole at 200/s would take RECIPIENTS / 200 seconds and show nothing more.
 *
 * Through the built-in sink (the connection removed): how soon the first copy of a duplicate left
 * after `send` (start_ms), and its rate over SINK_WINDOW_S of steady sending (or its whole span if
 * it finishes first) against the drain bench's rate in the same run (drain_ratio), which is also
 * a steady-state rate.
 */
const RECIPIENTS = Number(process.env.BENCH_BROADCAST_RECIPIENTS ?? (QUICK ? 5000 : 100_000));
const CONCURRENCY = 8;
/** The SES account's MaxSendRate (§23.6). */
const SES_RATE = 200;
/** Transactional sends a second, and for how long, in each of the two measurements. */
const TX_PER_S = 10;
const TX_SECONDS = QUICK ? 5 : 20;
/** How long the sink phase's rate is measured, once the broadcast is under way. */
const SINK_WINDOW_S = Number(process.env.BENCH_BROADCAST_SINK_SECONDS ?? (QUICK ? 15 : 90));

async function seed(sql: Sql, projectId: string) {
  const segmentId = newId('segment');
  await sql`insert into segments (id, project_id, name) values (${segmentId}, ${projectId}, 'bench')`;
  // In chunks, ids made here so contact id order is insertion order.
  for (let done = 0; done < RECIPIENTS; done += 10_000) {
    const ids = Array.from({ length: Math.min(10_000, RECIPIENTS - done) }, () => newId('contact'));
    await sql`insert into contacts (id, project_id, email, first_name)
      select id, ${projectId}, 'reader' || (${done}::int + i) || '@example.com', 'Reader' from unnest(${ids}::text[]) with ordinality t(id, i)`;
    await sql`insert into contact_segments (segment_id, contact_id, project_id) select ${segmentId}, id, ${projectId} from unnest(${ids}::text[]) id`;
  }
  return segmentId;
}

type Api = { url: string; key: string };
async function call(api: Api, path: string, body: unknown, expect: number) {
  const res = await fetch(`${api.url}${path}`, {
    method: 'POST', headers: { authorization: `Bearer ${api.key}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  if (res.status !== expect) throw new Error(`${path} answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as { id: string };
}

/** TX_PER_S transactional sends a second for TX_SECONDS; their accept-to-sent p99 and max once all are sent. */
async function transactional(sql: Sql, api: Api, projectId: string, tag: string) {
  const ids: string[] = [];
  const started = performance.now();
  for (let i = 0; i < TX_PER_S * TX_SECONDS; i++) {
    const wait = started + (i * 1000) / TX_PER_S - performance.now();
    if (wait > 0) await sleep(wait);
    const body = { from: 'Bench <bench@example.com>', to: 'reset@example.com', subject: 'Reset your password', text: 'Your code is 123456.', tags: [{ name: 'run', value: tag }] };
    ids.push((await call(api, '/v1/emails', body, 201)).id);
  }
  await waitUntil(`${ids.length} transactional emails sent`, async () => {
    const [row] = await sql<[{ n: number; failed: number }]>`
      select count(*) filter (where status = 'sent')::int as n, count(*) filter (where status = 'failed')::int as failed
      from emails where project_id = ${projectId} and id = any(${ids})`;
    if (row.failed) throw new Error(`${row.failed} transactional emails failed`);
    return row.n === ids.length;
  }, 600_000, 200);
  const [row] = await sql<[{ p99: number; max: number }]>`
    select percentile_cont(0.99) within group (order by extract(epoch from sent_at - created_at) * 1000) as p99,
      max(extract(epoch from sent_at - created_at) * 1000)::float8 as max
    from emails where project_id = ${projectId} and id = any(${ids})`;
  return { p99: round(row.p99), max: round(row.max) };
}

const broadcastBody = (segmentId: string) => ({
  segment_id: segmentId, from: 'News <news@example.com>', subject: 'Hello {{{FIRST_NAME|there}}}',
  html: `<p>Hi {{{FIRST_NAME|there}}}. ${'News of the month. '.repeat(20)}</p>`, text: 'Hi {{{FIRST_NAME|there}}}.',
});

const firstCopySent = (db: Sql, id: string) =>
  waitUntil('the first copy sent', async () => (await db`select 1 from emails where broadcast_id = ${id} and status = 'sent' limit 1`).length > 0, 120_000, 20);

export async function broadcast(ctx: BenchContext): Promise<BenchResult> {
  const ses = await startFakeSes({ closeAfterFile: false });
  ses.quota.maxSendRate = SES_RATE;
  const { sql, projectId, key, api: apiProcess } = await apiWithKey(ctx, 'bench broadcast', { PUBLIC_BASE_URL: 'https://mail.example.com' });
  const db = createSql(ctx.databaseUrl, { max: 2 });
  try {
    const { url } = await apiProcess.logLine('api listening');
    const api = { url: String(url), key };
    const segmentId = await seed(sql, projectId);
    const env = {
      ...ctx.env, SINK_SMTP_PORT: '0', METRICS_PORT: '0', WORKER_CONCURRENCY: String(CONCURRENCY),
      PUBLIC_BASE_URL: 'https://mail.example.com', AWS_ENDPOINT_URL_SESV2: ses.url,
    };
    return await withWorker(env, async (workerPid) => {
      // Through SES at SES_RATE: the project connected (the quota as GetAccount would say).
      const config = loadConfig({ ...ctx.env, NODE_ENV: 'development' }, { requireRedis: false });
      await connectProvider(sql, config, {
        projectId, region: 'us-east-1', accessKeyId: 'AKIDBENCHBROADCAST', secretAccessKey: 'bench-secret', sendQuota: { maxSendRate: SES_RATE, max24HourSend: 5_000_000 },
      });
      const alone = await transactional(db, api, projectId, 'alone');
      const { id } = await call(api, '/v1/broadcasts', broadcastBody(segmentId), 201);
      await call(api, `/v1/broadcasts/${id}/send`, {}, 200);
      await firstCopySent(db, id);
      // Measured once the broadcast is under way, so its whole window is queued ahead.
      await sleep(2000);
      const acceptedBefore = ses.accepted.length;
      const measuredFrom = Date.now();
      const during = await transactional(db, api, projectId, 'during');
      const sesRate = round((ses.accepted.length - acceptedBefore) / ((Date.now() - measuredFrom) / 1000));
      await call(api, `/v1/broadcasts/${id}/cancel`, {}, 200);
      const [copies] = await db<[{ n: number }]>`select count(*)::int as n from emails where broadcast_id = ${id} and status = 'sent'`;

      // Through the sink: the connection removed, a duplicate of the broadcast sent.
      await disconnectProvider(sql, projectId);
      const sink = await call(api, `/v1/broadcasts/${id}/duplicate`, {}, 201);
      const sendAt = Date.now();
      await call(api, `/v1/broadcasts/${sink.id}/send`, {}, 200);
      await firstCopySent(db, sink.id);
      const startMs = Date.now() - sendAt;
      await sleep(2000);
      const [{ t0 }] = await db<[{ t0: Date }]>`select now() as t0`;
      const deadline = Date.now() + SINK_WINDOW_S * 1000;
      const status = async () => (await db<[{ status: string }]>`select status from broadcasts where id = ${sink.id}`)[0].status;
      // CPU over the window beside the drain bench's, per copy: the worker's and PostgreSQL's.
      const { cpu } = await cpuDuring({ worker: workerPid, api: apiProcess.pid }, () =>
        waitUntil('the sink window', async () => Date.now() >= deadline || (await status()) === 'sent', SINK_WINDOW_S * 1000 + 60_000, 500));
      const finished = (await status()) === 'sent';
      const [span] = finished
        ? await db<[{ s: number; n: number }]>`
            select extract(epoch from max(sent_at) - min(sent_at))::float8 as s, count(*)::int as n from emails where broadcast_id = ${sink.id} and status = 'sent'`
        : await db<[{ s: number; n: number }]>`
            select extract(epoch from now() - ${t0}::timestamptz)::float8 as s, count(*)::int as n
            from emails where broadcast_id = ${sink.id} and status = 'sent' and sent_at >= ${t0}::timestamptz`;
      if (finished && span.n !== RECIPIENTS) throw new Error(`${span.n} copies sent, expected ${RECIPIENTS}`);
      if (!finished) await call(api, `/v1/broadcasts/${sink.id}/cancel`, {}, 200);
      const rate = round(span.n / span.s);
      const drainRate = ctx.earlier?.drain?.rate_per_s;
      return {
        bench: 'broadcast',
        recipients: RECIPIENTS,
        start_ms: startMs,
        rate_per_s: rate,
        drain_ratio: typeof drainRate === 'number' ? round(rate / drainRate, 3) : null,
        transactional_p99_ms_alone: alone.p99,
        transactional_p99_ms_during: during.p99,
        transactional_max_ms_alone: alone.max,
        transactional_max_ms_during: during.max,
        ses_rate_limit_per_s: SES_RATE,
        // What SES accepted a second while the transactional mail was measured (copies and transactional together).
        ses_accepted_per_s_during: sesRate,
        ses_peak_per_s: ses.peakPerSecond(),
        ses_throttled: ses.stats.throttled,
        ses_broadcast_copies_sent: copies.n,
        // The sink's rate: over the whole broadcast when it finished within the window, else over the window.
        sink_rate_over: finished ? 'whole broadcast' : `${round(span.s)} s window`,
        sink_copies_measured: span.n,
        sink_cpu_s: cpu,
        sink_cpu_ms_per_copy: { worker: round((cpu.worker! * 1000) / span.n, 2), postgres: round((cpu.postgres! * 1000) / span.n, 2) },
        concurrency: CONCURRENCY,
      };
    });
  } finally {
    await apiProcess.stop();
    await db.end();
    await sql.end();
    await ses.close();
  }
}
