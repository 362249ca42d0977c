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
 * Both sizes span the same 48 days, ending now, over ten projects, as a real installation's history
 * does: the 1 million emails are one every 4.1 s, and the 10 thousand are every hundredth of them
 * (loaded first; the other 990 thousand are loaded around them), so what grows is how much traffic
 * each day, hour and minute holds, which is what must not slow a read down. Each email has about
 * 2.3 events (sent, delivered or bounced, or failed; an open on 60% and a click on 20% of the 40%
 * that are tracked) and one webhook delivery per event (every project has an endpoint), tags (a
 * rare one on 2%), and a mix of relayed (20%, with their raw message), templated (30%) and tracked
 * mail. Rows are loaded with generate_series straight into the schema as it stands, with a
 * suppression per bounce, then `stats rebuild` derives the counters and tag and recipient entries.
 * Routes are timed as p50 of sequential requests to the production API bundle, SQL as the median of
 * repeated runs. Then the same reads over 98 day partitions (the 90 days the default retention
 * keeps, today and a week ahead; the 48 days loaded and 43 older ones empty) and over the newest 30
 * (CONTRACT §18.16), the older days detached and attached back between counts, in three rounds of
 * alternating order: the cost of the days kept. Last, at 1 million: the database size, retention
 * of the oldest day and of a month (and the bodies), and the accept and send latency while that
 * month goes.
 *
 * Prints one line per read on stdout: {"bench":"scale","read":…,"small_ms":…,"large_ms":…,"ratio":…,
 * "p98_ms":…,"p30_ms":…,"partitions_ratio":…,"partitions_ratio_rounds":[…]} (partitions_ratio = p98_ms /
 * p30_ms, each the median of the rounds; the rounds' own ratios after it).
 */
const SMALL = QUICK ? 2_000 : 10_000;
export const LARGE = QUICK ? 20_000 : 1_000_000;
/** Days of history at both sizes. */
const HISTORY_DAYS = 48;
/** Seconds between two emails of the large history. */
const SPACING_S = (HISTORY_DAYS * 86_400) / LARGE;
/** The small history is every STRIDE-th email of the large one. */
const STRIDE = LARGE / SMALL;
const CHUNK = 100_000;
const PROJECTS = 10;
const PAGE = 20;
const ROUTE_RUNS = 40;
const SQL_RUNS = 25;

const HTML = `<html><body><h1>Your order</h1><p>${'Thank you for your order. '.repeat(12)}</p><p>Questions? Reply to this email.</p></body></html>`;
const TEXT = `Your order\n\n${'Thank you for your order. '.repeat(12)}\n\nQuestions? Reply to this email.`;

export type Setup = { projects: string[]; templates: string[]; key: string; sendKey: string; cookie: string; base: Date; to?: string };

export async function setUp(sql: Sql): Promise<Setup> {
  const projects: string[] = [];
  const templates: string[] = [];
  for (let p = 0; p < PROJECTS; p++) projects.push((await createProject(sql, `scale ${p}`)).id);
  const { key } = await createApiKey(sql, projects[0]!, 'scale');
  const { key: sendKey } = await createApiKey(sql, projects[1]!, 'scale-send');
  for (const project of projects) {
    await sql`insert into webhook_endpoints (id, project_id, url, secret_encrypted)
      values (${newId('webhook')}, ${project}, ${`https://hooks.bench.example/${project}`}, ${Buffer.from('not a real secret')})`;
    // A published template of each project, which its templated emails name.
    const id = newId('template');
    const version = newId('templateVersion');
    await sql`insert into templates (id, project_id, name, subject, html, text, draft_version_id, published_version_id, published_at)
      values (${id}, ${project}, 'order', 'Order {{number}}', ${HTML}, ${TEXT}, ${newId('templateVersion')}, ${version}, now())`;
    await sql`insert into template_versions (id, template_id, project_id, version, subject, html, text)
      values (${version}, ${id}, ${project}, 1, 'Order {{number}}', ${HTML}, ${TEXT})`;
    templates.push(id);
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
  // The day partitions of the default retention's 90 days, as a database in steady state has them
  // (the 48 days loaded are the newest of them).
  await ensurePartitions(sql, { from: new Date(Date.now() - 90 * 86_400_000) });
  return { projects, templates, key, sendKey, cookie: `mailroom_session=${token}`, base: new Date(Date.now() - 60_000) };
}

const RAW = `From: orders@bench.example\r\nTo: customer@customer.example\r\nSubject: Order\r\nContent-Type: text/plain\r\n\r\n${TEXT}\r\n`;

/**
 * Emails number 0 to LARGE - 1, newest first: email i was created i spacings before `base`, in
 * project (i + i / STRIDE) % 10 (so the small history's emails, i % STRIDE = 0, are spread over
 * the projects too). Every other trait comes from a hash of i: 1% fail, 1% bounce, 2% carry a rare
 * tag, 20% are relayed, 30% of the rest templated, 40% tracked (60% of those opened, 20% clicked).
 * `which` loads the small history's emails, all the others, or all of them.
 */
export async function load(sql: Sql, s: Setup, which: 'small' | 'rest' | 'all') {
  const total = which === 'small' ? SMALL : LARGE;
  const step = which === 'small' ? STRIDE : 1;
  for (let a = 0; a < total * step; a += CHUNK * step) {
    const b = Math.min(LARGE, a + CHUNK * step);
    await sql.begin(async (tx) => {
      await tx`set local synchronous_commit = off`;
      await tx`
        with t as (
          select i, abs(hashtext('e' || i)) as h, ${s.base}::timestamptz - i * make_interval(secs => ${SPACING_S}) as ts,
                 1 + (i + i / ${STRIDE}) % 10 as p
          from generate_series(${a}::int, ${b - 1}::int) as i
          where ${which === 'small' ? tx`i % ${STRIDE} = 0` : which === 'rest' ? tx`i % ${STRIDE} <> 0` : tx`true`}),
        traits as (
          select t.*, h % 100 = 7 as failed, h % 100 = 13 as bounced, (h / 100) % 50 = 0 as rare,
                 (h / 1000000) % 10 < 2 as relayed, (h / 10000000) % 10 < 3 as templated,
                 (h / 5000) % 10 < 4 as tracked, (h / 100000) % 10 < 6 as opened, (h / 100000) % 10 < 2 as clicked
          from t),
        em as (
          insert into emails (id, project_id, status, from_address, to_addresses, subject, html, text, tags,
                              source, raw_message, submitted_message_id, template_id, template_version,
                              track_opens, track_clicks, tracked_links, opened_at, clicked_at,
                              sent_at, delivered_at, provider_message_id, created_at, updated_at)
          select bench_id('email_', ts, 'e' || i), (${s.projects}::text[])[p],
                 case when failed then 'failed' else 'sent' end,
                 'orders@bench.example', array['user' || (abs(hashtext('a' || i)) % 20000) || '@customer.example'], 'Order ' || i,
                 ${HTML}, ${TEXT},
                 case when rare then '[{"name":"category","value":"receipt"},{"name":"campaign","value":"rare"}]'::jsonb
                      when i % 2 = 0 then '[{"name":"category","value":"receipt"}]'::jsonb
                      else '[{"name":"category","value":"welcome"}]'::jsonb end,
                 case when relayed then 'smtp' else 'api' end,
                 case when relayed then convert_to(${RAW}, 'UTF8') end,
                 case when relayed then '<bench-' || i || '@relay.bench.example>' end,
                 case when templated and not relayed then (${s.templates}::text[])[p] end,
                 case when templated and not relayed then 1 end,
                 tracked, tracked, case when tracked then array['https://shop.bench.example/orders'] end,
                 case when tracked and opened and not failed and not bounced then least(ts + interval '3 minutes', ${s.base}::timestamptz) end,
                 case when tracked and clicked and not failed and not bounced then least(ts + interval '4 minutes', ${s.base}::timestamptz) end,
                 case when not failed then ts + interval '2 seconds' end,
                 case when not failed and not bounced then ts + interval '5 seconds' end,
                 case when not failed then 'bench-' || i end,
                 ts, ts + interval '5 seconds'
          from traits
          returning id, project_id, status, tags, to_addresses, delivered_at, opened_at, clicked_at, created_at),
        ev as (
          insert into events (id, project_id, email_id, type, data, created_at)
          select bench_id('evt_', k.at, e.id || k.type), e.project_id, e.id, k.type, jsonb_build_object('tags', e.tags), k.at
          from em e
          cross join lateral (values
            ('email.sent', e.created_at + interval '2 seconds', e.status = 'sent'),
            ('email.delivered', e.created_at + interval '5 seconds', e.status = 'sent' and e.delivered_at is not null),
            ('email.bounced', e.created_at + interval '5 seconds', e.status = 'sent' and e.delivered_at is null),
            ('email.failed', e.created_at + interval '2 seconds', e.status = 'failed'),
            ('email.opened', e.opened_at, e.opened_at is not null),
            ('email.clicked', e.clicked_at, e.clicked_at is not null)) as k(type, at, applies)
          where k.applies
          returning id, project_id, email_id, created_at),
        wd as (
          insert into webhook_deliveries (id, project_id, endpoint_id, event_id, email_id, status, attempt_count, last_attempt_at,
                                          next_attempt_at, response_status, error, created_at)
          select bench_id('whd_', ev.created_at, ev.id), ev.project_id, w.id, ev.id, ev.email_id,
                 case when abs(hashtext(ev.id)) % 100 = 0 then 'failed' else 'delivered' end, 1, ev.created_at + interval '1 second',
                 null, case when abs(hashtext(ev.id)) % 100 = 0 then 500 else 200 end,
                 case when abs(hashtext(ev.id)) % 100 = 0 then 'HTTP 500 from the receiver' end, ev.created_at
          from ev join webhook_endpoints w on w.project_id = ev.project_id
          returning 1)
        insert into suppressions (project_id, address, reason, email_id, created_at)
        select project_id, to_addresses[1], 'bounced', id, created_at + interval '5 seconds'
        from em where status = 'sent' and delivered_at is null
        on conflict do nothing`;
    });
    process.stderr.write(`bench: scale: loaded emails ${a} to ${b - 1} (${which})\n`);
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
    select id from emails where project_id = ${p} order by id desc offset ${Math.floor(total / 2)} limit 1`;
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
  // §21.5: one customer's emails, by recipient (the address of the measured project's oldest email
  // at 10 thousand: on about 6 of its emails at 1 million, spread over the history), and an address on none.
  routes.push(['GET /v1/emails?to=', `/v1/emails?limit=${PAGE}&to=${encodeURIComponent(s.to!)}`, auth]);
  routes.push(['GET /v1/emails?to= (on no email)', `/v1/emails?limit=${PAGE}&to=nobody%40customer.example`, auth]);
  for (const [name, path, headers] of routes) out[name] = await timeRoute(api + path, headers);
  // As a running worker's `inflight__sweep` job does each minute: the reads of what is in flight
  // (ops.stuck, ops.email_pipeline, ops.webhook_health, the overview) read the partitions it found,
  // and, with sweeps for the last hour as a worker running that long has made, those of the hour's sends too.
  await sql`select mailroom_sweep_inflight()`;
  await sql`update inflight_sweep set continuous_since = least(continuous_since, now() - interval '2 hours')`;
  for (const view of ['queue', 'email_pipeline', 'webhook_health', 'stuck', 'domains', 'providers', 'reputation']) {
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

/** Retention's cost at 1 million, and the accept and send latency while a month goes. */
async function measureRetention(sql: Sql, s: Setup, url: string, env: Record<string, string>) {
  const services: Service[] = [];
  try {
    const keepAll = { retentionDays: 36_500, bodyRetentionDays: 36_500 };
    const worker = spawnRole('worker', { ...env, SINK_SMTP_PORT: String(await freePort()), METRICS_PORT: '0', LOG_LEVEL: 'info', RETENTION_DAYS: '36500', BODY_RETENTION_DAYS: '36500' });
    services.push(worker);
    await worker.logLine('worker running', 60_000);
    const quiet = await sendLatency(url, sql, s, 400);
    let started = Date.now();
    const day = await applyRetention(sql, { ...keepAll, retentionDays: HISTORY_DAYS - 1 });
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
    const month = untilDone({ ...keepAll, retentionDays: HISTORY_DAYS - 31 }).then((r) => { monthS = (Date.now() - started) / 1000; return r; });
    const during = await sendLatency(url, sql, s, 400, month);
    const monthResult = await month;
    process.stderr.write(`bench: scale: retention of a month: ${monthResult.emails_removed} emails in ${round(monthS, 2)} s, ${monthResult.runs} runs\n`);
    started = Date.now();
    const bodies = await applyRetention(sql, { retentionDays: HISTORY_DAYS - 31, bodyRetentionDays: 10 });
    const bodiesS = (Date.now() - started) / 1000;
    await sql`vacuum analyze`;
    return {
      retention_day: { emails_removed: day.emails_removed, seconds: round(dayS, 2) },
      retention_month: { emails_removed: monthResult.emails_removed, seconds: round(monthS, 2), runs: monthResult.runs },
      body_purge: { bodies_purged: bodies.bodies_purged, seconds: round(bodiesS, 2) },
      sends_quiet: quiet,
      sends_during_month_removal: during,
      size_after_retention_and_vacuum: await sizes(sql),
    };
  } finally {
    for (const service of services.reverse()) await service.stop();
  }
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
    await load(sql, s, 'small');
    [{ to: s.to }] = await sql<[{ to: string }]>`select to_addresses[1] as to from emails where project_id = ${s.projects[0]!} order by id limit 1`;
    const loadSmallS = round((Date.now() - started) / 1000);
    const small = await measure(sql, s, url);
    started = Date.now();
    await load(sql, s, 'rest');
    const loadLargeS = round((Date.now() - started) / 1000);
    const large = await measure(sql, s, url);
    const before = await sizes(sql);

    // The same reads over the days a database keeps: 98 day partitions (the default retention's
    // 90 days, today and a week ahead), then the newest 30 of them. No worker runs yet: its
    // retention would drop the days detached between counts.
    const byPartitions = await measureByPartitions(sql, s, url);

    // Retention at 1 million over 48 days: the oldest days (whole partitions: the partial first day
    // and the next), then a month more, then the bodies past 10 days. BENCH_SCALE_RETENTION=0 skips it.
    const retention = process.env.BENCH_SCALE_RETENTION === '0' ? undefined : await measureRetention(sql, s, url, env);
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
      ...retention,
    };
  } finally {
    for (const service of services.reverse()) await service.stop();
    await sql.end({ timeout: 2 });
  }
}
