import { createSql, type Sql } from '../src/platform/db.ts';
import { createProject } from '../src/projects/service.ts';
import { createApiKey } from '../src/keys/service.ts';
import { newId } from '../src/platform/ids.ts';
import { randomBase64url, sha256 } from '../src/platform/crypto.ts';
import { rebuildStats } from '../src/stats/rebuild.ts';
import { applyRetention } from '../src/retention/apply.ts';
import { ensurePartitions, PARTITIONED_TABLES } from '../src/retention/partitions.ts';
import { freePort, QUICK, round, sleep, spawnRole, type BenchContext, type BenchResult, type Service } from './support.ts';

/**
 * `npm run bench -- scale`: the reads of CONTRACT §17.2 at 10 thousand and at 1 million emails.
 *
 * History grows at one steady rate (1 million emails over 120 days, one every 10.4 s, ending now,
 * spread over ten projects), so the small database is the last 1.2 days of the large one: what
 * changes between the two is how much history lies behind the recent window, which is what must
 * not slow a read down. Rows are loaded with generate_series straight into the schema as it stands
 * (emails with bodies and tags, their events, one webhook delivery per event for the five projects
 * with an endpoint, a suppression per bounce), then `stats rebuild` derives the counters and tag
 * entries. Routes are timed as p50 of sequential requests to the production API bundle, SQL as the
 * median of repeated runs. Then, at 1 million: the database size, retention of one day and of a
 * month (and the bodies), and the accept and send latency while that month goes. Last, the same
 * reads over 98 day partitions (the 90 days the default retention keeps, today and a week ahead)
 * and over the newest 30 (CONTRACT §18.16), the older days detached and attached back between
 * counts, in three rounds of alternating order: the cost of the days kept, rows aside.
 *
 * Prints one line per read on stdout: {"bench":"scale","read":…,"small_ms":…,"large_ms":…,"ratio":…,
 * "p98_ms":…,"p30_ms":…,"partitions_ratio":…,"partitions_ratio_rounds":[…]} (partitions_ratio = p98_ms /
 * p30_ms, each the median of the rounds; the rounds' own ratios after it).
 */
const SMALL = QUICK ? 2_000 : 10_000;
export const LARGE = QUICK ? 20_000 : 1_000_000;
/** Seconds between two emails: a million over 120 days. */
const SPACING_S = (120 * 86_400) / 1_000_000;
const CHUNK = 100_000;
const PROJECTS = 10;
const PAGE = 20;
const ROUTE_RUNS = 40;
const SQL_RUNS = 25;

const HTML = `<html><body><h1>Your order</h1><p>${'Thank you for your order. '.repeat(12)}</p><p>Questions? Reply to this email.</p></body></html>`;
const TEXT = `Your order\n\n${'Thank you for your order. '.repeat(12)}\n\nQuestions? Reply to this email.`;

export type Setup = { projects: string[]; key: string; sendKey: string; cookie: string; base: Date };

export async function setUp(sql: Sql): Promise<Setup> {
  const projects: string[] = [];
  for (let p = 0; p < PROJECTS; p++) projects.push((await createProject(sql, `scale ${p}`)).id);
  const { key } = await createApiKey(sql, projects[0]!, 'scale');
  const { key: sendKey } = await createApiKey(sql, projects[1]!, 'scale-send');
  for (let p = 0; p < PROJECTS; p += 2) {
    await sql`insert into webhook_endpoints (id, project_id, url, secret_encrypted)
      values (${newId('webhook')}, ${projects[p]!}, ${`https://hooks.bench.example/${p}`}, ${Buffer.from('not a real secret')})`;
  }
  // The measured project sends through SES (as far as ops.providers can tell); the others use the sink.
  await sql`
    with account as (
      insert into ses_accounts (region, access_key_digest, max_send_rate, max_24_hour_send, quota_checked_at)
      values ('us-east-1', sha256(convert_to('AKIABENCHSCALE', 'UTF8')), 14, 50000, now()) returning id)
    insert into provider_connections (project_id, region, access_key_id, secret_access_key_encrypted, ses_account_id)
    select ${projects[0]!}, 'us-east-1', 'AKIABENCHSCALE', ${Buffer.from('not a real secret')}, id from account`;
  const owner = newId('owner');
  await sql`insert into members (id, email, role, password_hash) values (${owner}, 'owner@bench.example', 'owner', 'unused')`;
  const token = randomBase64url(32);
  await sql`insert into dashboard_sessions (id, member_id, csrf_secret, expires_at)
    values (${sha256(token).toString('hex')}, ${owner}, ${randomBase64url(32)}, now() + interval '1 day')`;
  // Ids for given times: the ULID's time part, then 16 characters of a hash (valid base32).
  await sql.unsafe(`create or replace function bench_id(prefix text, at timestamptz, seed text) returns text
    language sql immutable as $$ select left(mailroom_id_floor(prefix, at), length(prefix) + 10) || upper(substr(md5(seed), 1, 16)) $$`);
  // The daily partitions of the 120 days loaded, as the migration makes them for existing history.
  await ensurePartitions(sql, { from: new Date(Date.now() - 121 * 86_400_000) });
  return { projects, key, sendKey, cookie: `mailroom_session=${token}`, base: new Date(Date.now() - 60_000) };
}

/**
 * Emails number `from` to `to - 1`, newest first: email i was created i spacings before `base`, in
 * project i % 10; within a project (j = i / 10) 1% fail, 1% bounce, 2% carry a rare tag.
 */
export async function load(sql: Sql, s: Setup, from: number, to: number) {
  for (let a = from; a < to; a += CHUNK) {
    const b = Math.min(to, a + CHUNK);
    await sql.begin(async (tx) => {
      await tx`set local synchronous_commit = off`;
      await tx`
        insert into emails (id, project_id, status, from_address, to_addresses, subject, html, text, tags,
                            sent_at, delivered_at, provider_message_id, created_at, updated_at)
        select bench_id('email_', ts, 'e' || i), (${s.projects}::text[])[1 + i % 10],
               case when j % 100 = 7 then 'failed' else 'sent' end,
               'orders@bench.example', array['user' || (j % 20000) || '@customer.example'], 'Order ' || i,
               ${HTML}, ${TEXT},
               case when j % 50 = 0 then '[{"name":"category","value":"receipt"},{"name":"campaign","value":"rare"}]'::jsonb
                    when i % 2 = 0 then '[{"name":"category","value":"receipt"}]'::jsonb
                    else '[{"name":"category","value":"welcome"}]'::jsonb end,
               case when j % 100 <> 7 then ts + interval '2 seconds' end,
               case when j % 100 not in (7, 13) then ts + interval '5 seconds' end,
               case when j % 100 <> 7 then 'bench-' || i end,
               ts, ts + interval '5 seconds'
        from generate_series(${a}::int, ${b - 1}::int) as i
        cross join lateral (select i / 10 as j, ${s.base}::timestamptz - i * make_interval(secs => ${SPACING_S}) as ts) t`;
      const lo = new Date(s.base.getTime() - (b - 1) * SPACING_S * 1000 - 1);
      const hi = new Date(s.base.getTime() - a * SPACING_S * 1000 + 1);
      await tx`
        with ev as (
          insert into events (id, project_id, email_id, type, data, created_at)
          select bench_id('evt_', e.created_at + k.after, e.id || k.type), e.project_id, e.id, k.type,
                 jsonb_build_object('tags', e.tags), e.created_at + k.after
          from emails e
          cross join lateral (values
            ('email.sent', interval '2 seconds', e.status = 'sent'),
            ('email.delivered', interval '5 seconds', e.status = 'sent' and e.delivered_at is not null),
            ('email.bounced', interval '5 seconds', e.status = 'sent' and e.delivered_at is null),
            ('email.failed', interval '2 seconds', e.status = 'failed')) as k(type, after, applies)
          where e.created_at between ${lo} and ${hi} and k.applies
          returning id, project_id, email_id, created_at)
        insert into webhook_deliveries (id, project_id, endpoint_id, event_id, email_id, status, attempt_count, last_attempt_at,
                                        next_attempt_at, response_status, error, created_at)
        select bench_id('whd_', ev.created_at, ev.id), ev.project_id, w.id, ev.id, ev.email_id,
               case when abs(hashtext(ev.id)) % 100 = 0 then 'failed' else 'delivered' end, 1, ev.created_at + interval '1 second',
               null, case when abs(hashtext(ev.id)) % 100 = 0 then 500 else 200 end,
               case when abs(hashtext(ev.id)) % 100 = 0 then 'HTTP 500 from the receiver' end, ev.created_at
        from ev join webhook_endpoints w on w.project_id = ev.project_id`;
      await tx`
        insert into suppressions (project_id, address, reason, email_id, created_at)
        select project_id, to_addresses[1], 'bounced', id, created_at + interval '5 seconds'
        from emails where created_at between ${lo} and ${hi} and status = 'sent' and delivered_at is null
        on conflict do nothing`;
    });
    process.stderr.write(`bench: scale: loaded ${b} emails\n`);
  }
  const started = Date.now();
  await rebuildStats(sql);
  await sql`vacuum analyze`;
  // The load's dirty pages are written out now, not by a checkpoint in the middle of the timings.
  await sql`checkpoint`;
  process.stderr.write(`bench: scale: stats rebuild and vacuum analyze in ${round((Date.now() - started) / 1000)} s\n`);
}

/** The day partitions the reads are measured over (CONTRACT §18.16). */
const PARTITION_COUNTS = [98, 30] as const;
/** Rounds of both counts, in turn (98 then 30, then 30 then 98, ...), each read's medians pooled. */
const PARTITION_ROUNDS = 3;

/** The day partitions of every table partitioned by day, newest first, with the bound each was attached with. */
async function dayPartitions(sql: Sql) {
  return sql<{ parent: string; child: string; bound: string }[]>`
    select p.relname as parent, c.relname as child, pg_get_expr(c.relpartbound, c.oid) as bound
    from pg_inherits i join pg_class c on c.oid = i.inhrelid join pg_class p on p.oid = i.inhparent
    where p.relname = any(${[...PARTITIONED_TABLES]}) order by c.relname desc`;
}

/** How many day partitions emails has. */
async function emailDays(sql: Sql) {
  const [left] = await sql<[{ n: number }]>`select count(*)::int as n from pg_inherits where inhparent = 'emails'::regclass`;
  return left.n;
}

/**
 * Drops the oldest days until `kept` day partitions are left (those of every table partitioned
 * by day), as retention would have. The benchmark alone uses the database.
 */
async function keepNewestPartitions(sql: Sql, kept: number) {
  const days = await sql<{ suffix: string }[]>`
    select substr(c.relname, length('emails') + 1) as suffix
    from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent = 'emails'::regclass order by c.relname desc offset ${kept}`;
  for (const { suffix } of days) {
    await sql.unsafe(PARTITIONED_TABLES.map((t) => `drop table if exists ${t}${suffix}`).join('; '));
  }
  const left = await emailDays(sql);
  if (left < kept) throw new Error(`only ${left} day partitions to measure over, ${kept} wanted`);
  await sql`vacuum analyze`;
}

/**
 * Detaches the days older than the newest `kept` (they stay as tables, rows and all), or attaches
 * back those detached, so both counts are measured in turn over the same rows and neither always
 * comes second (caches, autovacuum and other load drift with time).
 */
async function detachOlderDays(sql: Sql, kept: number) {
  const days = (await sql<{ suffix: string }[]>`
    select substr(c.relname, length('emails') + 1) as suffix
    from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent = 'emails'::regclass order by c.relname desc offset ${kept}`).map((d) => d.suffix);
  const parts = (await dayPartitions(sql)).filter((p) => days.includes(p.child.slice(p.parent.length)));
  for (const p of parts) await sql.unsafe(`alter table ${p.parent} detach partition ${p.child}`);
  await sql.unsafe(`analyze ${PARTITIONED_TABLES.join(', ')}`);
  return parts;
}

async function attachBack(sql: Sql, parts: Array<{ parent: string; child: string; bound: string }>) {
  for (const p of parts) await sql.unsafe(`alter table ${p.parent} attach partition ${p.child} ${p.bound}`);
  await sql.unsafe(`analyze ${PARTITIONED_TABLES.join(', ')}`);
}

/** Every read at both counts, PARTITION_ROUNDS times in alternating order; each read's median per count, and each round's. */
async function measureByPartitions(sql: Sql, s: Setup, url: string) {
  const [many, few] = PARTITION_COUNTS;
  await keepNewestPartitions(sql, many);
  const rounds: Record<number, Array<Record<string, number>>> = { [many]: [], [few]: [] };
  let detached: Awaited<ReturnType<typeof detachOlderDays>> = [];
  for (let r = 0; r < PARTITION_ROUNDS; r++) {
    const order = r % 2 === 0 ? [many, few] : [few, many];
    for (const kept of order) {
      if (kept === few && detached.length === 0) detached = await detachOlderDays(sql, few);
      if (kept === many && detached.length > 0) { await attachBack(sql, detached); detached = []; }
      process.stderr.write(`bench: scale: round ${r + 1}, measuring over ${await emailDays(sql)} day partitions\n`);
      rounds[kept]!.push(await measure(sql, s, url));
    }
  }
  if (detached.length > 0) await attachBack(sql, detached);
  const pooled = (kept: number) => Object.fromEntries(Object.keys(rounds[kept]![0]!).map((read) => [read, median(rounds[kept]!.map((m) => m[read]!))]));
  return { [many]: pooled(many), [few]: pooled(few), rounds };
}

const median = (xs: number[]) => { const s = [...xs].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]!; };
const p99 = (xs: number[]) => { const s = [...xs].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(s.length * 0.99))]!; };

export async function timeRoute(url: string, headers: Record<string, string>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < ROUTE_RUNS + 5; i++) {
    const t0 = performance.now();
    const res = await fetch(url, { headers });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
    if (i >= 5) times.push(performance.now() - t0);
  }
  return median(times);
}

async function timeSql(sql: Sql, query: string): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < SQL_RUNS + 3; i++) {
    const t0 = performance.now();
    await sql.unsafe(query);
    if (i >= 3) times.push(performance.now() - t0);
  }
  return median(times);
}

/** Every read of §17.2, by name, in ms. */
async function measure(sql: Sql, s: Setup, api: string): Promise<Record<string, number>> {
  const auth = { authorization: `Bearer ${s.key}` };
  const p = s.projects[0]!;
  // An email from the middle of the measured project's history: its page, and paging past it.
  const total = (await sql`select count(*)::int as n from emails where project_id = ${p}`)[0]!.n as number;
  const [middle] = await sql<[{ id: string }]>`
    select id from emails where project_id = ${p} and created_at <= ${new Date(s.base.getTime() - (total * 10 / 2) * SPACING_S * 1000)}
    order by created_at desc limit 1`;
  const out: Record<string, number> = {};
  const routes: Array<[string, string, Record<string, string>]> = [
    ['GET /v1/emails', `/v1/emails?limit=${PAGE}`, auth],
    ['GET /v1/emails?status=sent', `/v1/emails?limit=${PAGE}&status=sent`, auth],
    ['GET /v1/emails?status=failed', `/v1/emails?limit=${PAGE}&status=failed`, auth],
    ['GET /v1/emails?tag (common)', `/v1/emails?limit=${PAGE}&tag=category:receipt`, auth],
    ['GET /v1/emails?tag (rare, 2%)', `/v1/emails?limit=${PAGE}&tag=campaign:rare`, auth],
    ['GET /v1/emails?tag (on no email)', `/v1/emails?limit=${PAGE}&tag=campaign:none`, auth],
    ['GET /v1/emails?starting_after (mid-history)', `/v1/emails?limit=${PAGE}&starting_after=${middle.id}`, auth],
    ['GET /v1/emails/{id}', `/v1/emails/${middle.id}`, auth],
    ['GET /v1/emails/{id}/events', `/v1/emails/${middle.id}/events`, auth],
    ['GET /v1/suppressions', `/v1/suppressions?limit=${PAGE}`, auth],
    ['GET /metrics', '/metrics', {}],
    ['dashboard overview', `/dashboard/projects/${p}`, { cookie: s.cookie }],
  ];
  // §21.5: one customer's emails, by recipient (user7@ is on 1 of the measured project's emails at
  // 10 thousand and 5 at 1 million), and an address on none.
  routes.push(['GET /v1/emails?to=', `/v1/emails?limit=${PAGE}&to=user7%40customer.example`, auth]);
  routes.push(['GET /v1/emails?to= (on no email)', `/v1/emails?limit=${PAGE}&to=nobody%40customer.example`, auth]);
  for (const [name, path, headers] of routes) out[name] = await timeRoute(api + path, headers);
  // As a running worker's `inflight__sweep` job does each minute: ops.stuck reads the partitions it found.
  await sql`select mailroom_sweep_inflight()`;
  for (const view of ['queue', 'email_pipeline', 'webhook_health', 'stuck', 'domains', 'providers']) {
    out[`ops.${view}`] = await timeSql(sql, `select * from ops.${view}`);
  }
  return out;
}

async function sizes(sql: Sql) {
  const [row] = await sql<[{ db: number; emails: number; events: number; deliveries: number }]>`
    select pg_database_size(current_database())::float8 / 1048576 as db,
           (select sum(pg_total_relation_size(relid)) from pg_partition_tree('emails'))::float8 / 1048576 as emails,
           (select sum(pg_total_relation_size(relid)) from pg_partition_tree('events'))::float8 / 1048576 as events,
           (select sum(pg_total_relation_size(relid)) from pg_partition_tree('webhook_deliveries'))::float8 / 1048576 as deliveries`;
  return { db_mb: round(row.db), emails_mb: round(row.emails), events_mb: round(row.events), deliveries_mb: round(row.deliveries) };
}

/**
 * Accept latency (POST /v1/emails, 4 at a time) and send latency (accepted to sent, through a
 * worker and the sink) for `count` emails, while `during` runs.
 */
async function sendLatency(api: string, sql: Sql, s: Setup, count: number, during?: Promise<unknown>) {
  const accept: number[] = [];
  const ids: string[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: 4 }, async () => {
    while (next < count) {
      next++;
      const t0 = performance.now();
      const res = await fetch(`${api}/v1/emails`, {
        method: 'POST',
        headers: { authorization: `Bearer ${s.sendKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ from: 'orders@bench.example', to: ['someone@customer.example'], subject: 'During retention', text: TEXT }),
      });
      const body = await res.json() as { id: string };
      if (res.status !== 200 && res.status !== 201) throw new Error(`POST /v1/emails: ${res.status}`);
      accept.push(performance.now() - t0);
      ids.push(body.id);
    }
  }));
  await during;
  for (let i = 0; i < 600; i++) {
    const [left] = await sql`select count(*)::int as n from emails where id = any(${ids}) and status <> 'sent'`;
    if (left!.n === 0) break;
    await sleep(100);
  }
  const sends = await sql<{ ms: number }[]>`
    select extract(epoch from sent_at - created_at) * 1000 as ms from emails where id = any(${ids}) and sent_at is not null`;
  return { accept_p50_ms: round(median(accept)), accept_p99_ms: round(p99(accept)), send_p50_ms: round(median(sends.map((r) => r.ms))), send_p99_ms: round(p99(sends.map((r) => r.ms))), sent: sends.length };
}

export async function scale(ctx: BenchContext): Promise<BenchResult> {
  const sql = createSql(ctx.databaseUrl, { max: 4, appName: 'bench-scale' });
  const services: Service[] = [];
  try {
    const s = await setUp(sql);
    // Nothing leaves the machine: the measured project's SES connection points at a closed local port.
    const env = { ...ctx.env, HOST: '127.0.0.1', API_RATE_LIMIT_PER_MINUTE: '1000000', LOG_LEVEL: 'warn', AWS_ENDPOINT_URL_SESV2: 'http://127.0.0.1:9', AWS_ENDPOINT_URL_SQS: 'http://127.0.0.1:9' };
    const api = spawnRole('api', { ...env, PORT: '0', LOG_LEVEL: 'info' });
    services.push(api);
    const { url } = await api.logLine('api listening') as { url: string };

    let started = Date.now();
    await load(sql, s, 0, SMALL);
    const loadSmallS = round((Date.now() - started) / 1000);
    const small = await measure(sql, s, url);
    started = Date.now();
    await load(sql, s, SMALL, LARGE);
    const loadLargeS = round((Date.now() - started) / 1000);
    const large = await measure(sql, s, url);
    const before = await sizes(sql);

    // Retention at 1 million over 120 days: the oldest days (whole partitions: the partial first day and the next), then the rest of the month past 90 days.
    const keepAll = { retentionDays: 36_500, bodyRetentionDays: 36_500 };
    const worker = spawnRole('worker', { ...env, SINK_SMTP_PORT: String(await freePort()), METRICS_PORT: '0', LOG_LEVEL: 'info', RETENTION_DAYS: '36500', BODY_RETENTION_DAYS: '36500' });
    services.push(worker);
    await worker.logLine('worker running', 60_000);
    const quiet = await sendLatency(url, sql, s, 400);
    started = Date.now();
    const day = await applyRetention(sql, { ...keepAll, retentionDays: 118 });
    const dayS = (Date.now() - started) / 1000;
    process.stderr.write(`bench: scale: retention of the oldest day: ${day.emails_removed} emails in ${round(dayS, 2)} s\n`);
    started = Date.now();
    let monthS = 0;
    // Until done: a run leaves a day it could not finish in time to the next run, as the worker's minutely job would.
    const untilDone = async (settings: { retentionDays: number; bodyRetentionDays: number }) => {
      const total = { emails_removed: 0, bodies_purged: 0, runs: 0 };
      for (let more = true; more;) {
        const r = await applyRetention(sql, settings);
        total.emails_removed += r.emails_removed;
        total.bodies_purged += r.bodies_purged;
        total.runs++;
        more = r.more;
      }
      return total;
    };
    const month = untilDone({ ...keepAll, retentionDays: 90 }).then((r) => { monthS = (Date.now() - started) / 1000; return r; });
    const during = await sendLatency(url, sql, s, 400, month);
    const monthResult = await month;
    process.stderr.write(`bench: scale: retention of the month past 90 days: ${monthResult.emails_removed} emails in ${round(monthS, 2)} s, ${monthResult.runs} runs\n`);
    started = Date.now();
    const bodies = await applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 30 });
    const bodiesS = (Date.now() - started) / 1000;
    await sql`vacuum analyze`;
    const after = await sizes(sql);

    // The same reads over the days a database keeps: 98 day partitions (the default retention's
    // 90 days, today and a week ahead), then the newest 30 of them.
    // The worker goes first: its retention runs would drop the days detached between counts.
    await worker.stop();
    services.splice(services.indexOf(worker), 1);
    const byPartitions = await measureByPartitions(sql, s, url);
    const [many, few] = PARTITION_COUNTS;
    for (const read of Object.keys(small)) {
      process.stdout.write(`${JSON.stringify({
        bench: 'scale', read, small_ms: round(small[read]!, 2), large_ms: round(large[read]!, 2), ratio: round(large[read]! / small[read]!, 2),
        [`p${few}_ms`]: round(byPartitions[few]![read]!, 2), [`p${many}_ms`]: round(byPartitions[many]![read]!, 2),
        partitions_ratio: round(byPartitions[many]![read]! / byPartitions[few]![read]!, 2),
        partitions_ratio_rounds: byPartitions.rounds[many]!.map((m, r) => round(m[read]! / byPartitions.rounds[few]![r]![read]!, 2)),
      })}\n`);
    }
    return {
      bench: 'scale',
      emails_small: SMALL,
      emails_large: LARGE,
      load_small_s: loadSmallS,
      load_large_s: loadLargeS,
      overview_large_ms: round(large['dashboard overview']!, 2),
      size_at_1m: before,
      retention_day: { emails_removed: day.emails_removed, seconds: round(dayS, 2) },
      retention_month: { emails_removed: monthResult.emails_removed, seconds: round(monthS, 2), runs: monthResult.runs },
      body_purge: { bodies_purged: bodies.bodies_purged, seconds: round(bodiesS, 2) },
      sends_quiet: quiet,
      sends_during_month_removal: during,
      size_after_retention_and_vacuum: after,
    };
  } finally {
    for (const service of services.reverse()) await service.stop();
    await sql.end({ timeout: 2 });
  }
}
