import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { ulid } from 'ulid';
import postgres from 'postgres';
import { ID_PREFIX, newId } from '../../src/platform/ids.ts';
import { ensurePartitions } from '../../src/retention/partitions.ts';
import { sweepInflight } from '../../src/retention/inflight.task.ts';
import { rebuildStats } from '../../src/stats/rebuild.ts';
import { inFlightCounts } from '../../src/projects/activity.ts';
import { recordEvent } from '../../src/events/record.ts';

const ctx = await createTestContext();
const t = await ctx.tenant('ops');
const sql = ctx.sql;
const DAY = 86_400_000;
/** An email id made at `ms`, so the row goes to that day's partition. */
const at = (ms: number) => `email_${ulid(ms).slice(0, 10)}${ulid().slice(10)}`;

async function email(status: string, extra: { sentAgo?: string; updatedAgo?: string; createdAgo?: string } = {}) {
  const id = newId('email');
  await sql`
    insert into emails (id, project_id, status, from_address, to_addresses, subject, text, sent_at, updated_at, created_at)
    values (${id}, ${t.projectId}, ${status}, 'a@x.test', ${['b@x.test']}, 's', 't',
      ${extra.sentAgo ? sql`now() - ${extra.sentAgo}::interval` : null},
      now() - ${extra.updatedAgo ?? '0 seconds'}::interval, now() - ${extra.createdAgo ?? '0 seconds'}::interval)`;
  return id;
}

test('ops.email_pipeline counts per status, oldest queued, and recent sends', async () => {
  await email('queued', { createdAgo: '10 minutes' });
  await email('queued');
  await email('sent', { sentAgo: '2 minutes' });
  await email('sent', { sentAgo: '30 minutes' });
  const rows = await sql`select status, emails::int, oldest_queued_age, sent_last_5m::int, sent_last_60m::int
    from ops.email_pipeline where project_id = ${t.projectId} order by status`;
  const byStatus = Object.fromEntries(rows.map((r) => [r.status, r]));
  assert.equal(byStatus.queued!.emails, 2);
  assert.ok(byStatus.queued!.oldestQueuedAge, 'oldest queued age is reported');
  assert.equal(byStatus.sent!.emails, 2);
  assert.equal(byStatus.sent!.sentLast5m, 1);
  assert.equal(byStatus.sent!.sentLast60m, 2);
});

// §17.2: the hour's sends are read per project from its range of the (project_id, sent_at) index,
// not by reading every email made in the hours the in-flight read spans. The view's own statement
// is planned as the function runs it, and auto_explain hands its plan back as a notice.
test('ops.email_pipeline reads each project\'s sends of the last hour from its sent_at range, not the recent emails', async () => {
  const p = await ctx.tenant('ops-sent-index');
  // Four hours of mail; one in five of it sent within the last hour (the 600 whose n is a multiple of 5, n s ago).
  for (let i = 0; i < 3000; i += 500) {
    const rows = Array.from({ length: 500 }, (_, k) => {
      const n = i + k;
      const ms = Date.now() - (n * 4_800) % (4 * 3_600_000);
      return { id: at(ms), created: new Date(ms), sent: n % 5 === 0 ? new Date(Date.now() - n * 1_000) : new Date(ms - 2 * 3_600_000) };
    });
    await sql`
      insert into emails (id, project_id, status, from_address, to_addresses, subject, text, sent_at, created_at)
      select r.id, ${p.projectId}, 'sent', 'a@x.test', array['b@x.test'], 's', 't', r.sent, r.created
      from jsonb_to_recordset(${sql.json(rows.map((r) => ({ id: r.id, created: r.created.toISOString(), sent: r.sent.toISOString() })))})
        as r(id text, created timestamptz, sent timestamptz)`;
  }
  await sql`analyze emails`;
  const plans: string[] = [];
  const conn = postgres(ctx.url, { max: 1, onnotice: (n) => { plans.push(String(n.message)); }, transform: { column: { from: postgres.toCamel } } });
  try {
    await conn`load 'auto_explain'`;
    await conn`select set_config('auto_explain.log_min_duration', '0', false), set_config('auto_explain.log_nested_statements', 'on', false),
      set_config('auto_explain.log_level', 'notice', false), set_config('auto_explain.log_format', 'json', false)`;
    // A table this small is cheapest read whole: with that ruled out, the index each read can use shows.
    await conn`set enable_seqscan = off`;
    const [row] = await conn`select sent_last_60m::int from ops.email_pipeline where project_id = ${p.projectId} and status = 'sent'`;
    assert.equal(row!.sentLast60m, 600);
  } finally {
    await conn.end();
  }
  type Node = { 'Index Name'?: string; 'Index Cond'?: string; Plans?: Node[] };
  const nodes = (n: Node): Node[] => [n, ...(n.Plans ?? []).flatMap(nodes)];
  const scans = plans.filter((m) => m.includes('sent_at'))
    .flatMap((m) => { try { return nodes((JSON.parse(m.slice(m.indexOf('{'))) as { Plan: Node }).Plan); } catch { return []; } })
    .filter((n) => n['Index Name']?.startsWith('emails_'));
  assert.ok(scans.some((n) => /project_id = p\.id/.test(n['Index Cond'] ?? '') && /sent_at > /.test(n['Index Cond'] ?? '')), JSON.stringify(scans));
  assert.ok(!scans.some((n) => n['Index Name']!.endsWith('_pkey')), JSON.stringify(scans));
});

test('ops.stuck lists emails in sending for over 5 minutes and overdue deliveries', async () => {
  const stuck = await email('sending', { updatedAgo: '6 minutes' });
  await email('sending', { updatedAgo: '1 minute' });
  const wh = newId('webhook');
  await sql`insert into webhook_endpoints (id, project_id, url, secret_encrypted) values (${wh}, ${t.projectId}, 'https://x.test/h', ${Buffer.from('x')})`;
  const evt = newId('event');
  await sql`insert into events (id, project_id, email_id, type) values (${evt}, ${t.projectId}, ${stuck}, 'email.sent')`;
  const overdue = newId('delivery');
  await sql`insert into webhook_deliveries (id, project_id, endpoint_id, event_id, email_id, status, next_attempt_at)
    values (${overdue}, ${t.projectId}, ${wh}, ${evt}, ${stuck}, 'pending', now() - interval '10 minutes')`;
  const rows = await sql`select kind, id from ops.stuck where project_id = ${t.projectId} order by kind`;
  assert.deepEqual(rows.map((r) => [r.kind, r.id]), [['email', stuck], ['webhook_delivery', overdue]]);

  const health = await sql`select status, consecutive_failures, pending_deliveries::int from ops.webhook_health where endpoint_id = ${wh}`;
  assert.deepEqual(health.map((h) => [h.status, h.consecutiveFailures, h.pendingDeliveries]), [['active', 0, 1]]);
});

// §18.16: with a recent sweep, ops.stuck reads only the partitions that sweep found holding work
// in flight, so its cost does not grow with the days kept; without one, it reads them all.
test('ops.stuck reads the partitions the last sweep found, or every partition when no sweep ran for 4 minutes', async () => {
  const p = await ctx.tenant('ops-sweep');
  const old = Date.now() - 20 * DAY;
  await ensurePartitions(sql, { from: new Date(old - 3 * DAY) });
  const insert = async (id: string) => sql`
    insert into emails (id, project_id, status, from_address, to_addresses, subject, text, updated_at, created_at)
    values (${id}, ${p.projectId}, 'sending', 'a@x.test', ${['b@x.test']}, 's', 't', now() - interval '6 minutes', ${new Date(old)})`;
  const swept = at(old);
  await insert(swept);
  assert.ok(await sweepInflight(sql) >= 1);
  const [{ partitions }] = await sql<[{ partitions: string[] }]>`select array_agg(partition order by partition) as partitions from inflight_partitions`;
  const oldDay = new Date(old).toISOString().slice(0, 10).replaceAll('-', '');
  assert.ok(partitions.includes(`emails_p${oldDay}`), partitions.join(', '));

  // Stuck since before the sweep by its clock, yet in a partition the sweep did not find: only
  // the swept partitions are read while the sweep is recent.
  const unswept = at(old - 3 * DAY);
  await insert(unswept);
  const listed = async () => (await sql<{ id: string }[]>`select id from ops.stuck where project_id = ${p.projectId} and kind = 'email'`).map((r) => r.id).sort();
  assert.deepEqual(await listed(), [swept]);

  await sql`update inflight_sweep set swept_at = now() - interval '5 minutes'`;
  assert.deepEqual(await listed(), [swept, unswept].sort());

  // Settled work leaves the swept partitions once no sweep has found it for 65 minutes (a read of
  // the last hour's sends still looks there until then).
  await sql`update emails set status = 'sent' where project_id = ${p.projectId}`;
  await sweepInflight(sql);
  const left = async () => (await sql<[{ n: number }]>`select count(*)::int as n from inflight_partitions where partition = ${`emails_p${oldDay}`}`)[0].n;
  assert.equal(await left(), 1);
  assert.deepEqual(await listed(), []);
  await sql`update inflight_partitions set found_at = found_at - interval '66 minutes' where partition = ${`emails_p${oldDay}`}`;
  await sweepInflight(sql);
  assert.equal(await left(), 0);
});

test('ops.queue shows jobs by task and state; ops.domains shows check age', async () => {
  await sql`select graphile_worker.add_job('email__send', '{}', run_at := now() + interval '1 hour')`;
  await sql`select graphile_worker.add_job('email__send', '{}')`;
  const q = await sql`select task, state, jobs::int from ops.queue where task = 'email__send' order by state`;
  assert.deepEqual(q.map((r) => [r.state, r.jobs]), [['ready', 1], ['scheduled', 1]]);
  await sql`insert into domains (id, project_id, value, region, last_checked_at) values (${newId('domain')}, ${t.projectId}, 'ops.test', 'us-east-1', now() - interval '2 hours')`;
  const [d] = await sql`select value, verification_status, extract(epoch from last_check_age)::int as age from ops.domains where project_id = ${t.projectId}`;
  assert.equal(d!.value, 'ops.test');
  assert.ok(d!.age >= 7200 && d!.age < 7300);
});

test('ops.webhook_health: each endpoint its own 24-hour success rate and newest error, across days and projects', async () => {
  const other = await ctx.tenant('ops-other');
  const endpoint = async (projectId: string) => {
    const id = newId('webhook');
    await sql`insert into webhook_endpoints (id, project_id, url, secret_encrypted) values (${id}, ${projectId}, 'https://x.test/h', ${Buffer.from('x')})`;
    return id;
  };
  const [a, b, c] = [await endpoint(t.projectId), await endpoint(t.projectId), await endpoint(other.projectId)];
  const oldEmail = await email('sent', { createdAgo: '20 days' });
  const newEmail = await email('sent');
  // Rows loaded by hand, as a restored backup's: `stats rebuild` derives the endpoints' counters
  // and last errors from them. A delivery's last attempt was `ago` back from now.
  const delivery = async (endpointId: string, projectId: string, emailId: string, status: string, error: string | null, ago: number) => {
    const evt = newId('event');
    await sql`insert into events (id, project_id, email_id, type) values (${evt}, ${projectId}, ${emailId}, 'email.delivered')`;
    await sql`insert into webhook_deliveries (id, project_id, endpoint_id, event_id, email_id, status, error, last_attempt_at, created_at)
      values (${ID_PREFIX.delivery + ulid(Date.now() - ago)}, ${projectId}, ${endpointId}, ${evt}, ${emailId}, ${status}, ${error},
              ${status === 'pending' ? null : new Date(Date.now() - ago)}, ${new Date(Date.now() - ago)})`;
  };
  const HOUR = 3_600_000;
  await delivery(a, t.projectId, newEmail, 'delivered', null, 3 * HOUR);
  await delivery(a, t.projectId, oldEmail, 'failed', 'HTTP 500 newest', 1 * HOUR); // an old email's event, today
  await delivery(a, t.projectId, newEmail, 'failed', 'HTTP 502 older', 2 * HOUR);
  await delivery(a, t.projectId, newEmail, 'failed', 'HTTP 503 past the window', 30 * HOUR);
  await delivery(a, t.projectId, newEmail, 'pending', null, 0);
  await delivery(b, t.projectId, newEmail, 'delivered', null, HOUR);
  await rebuildStats(sql);
  const health = async () => {
    const rows = await sql`select endpoint_id, success_rate_24h_pct::float8 as rate, last_error, pending_deliveries::int as pending
      from ops.webhook_health where endpoint_id in ${sql([a, b, c])}`;
    return Object.fromEntries(rows.map((r) => [r.endpointId, [r.rate, r.lastError, r.pending]]));
  };
  assert.deepEqual(await health(), { [a]: [33.3, 'HTTP 500 newest', 1], [b]: [100, null, 0], [c]: [null, null, 0] });
  // A second rebuild finds nothing to change.
  await rebuildStats(sql);
  assert.deepEqual(await health(), { [a]: [33.3, 'HTTP 500 newest', 1], [b]: [100, null, 0], [c]: [null, null, 0] });
});

// §17.2, §18.16: with a recent sweep, what is in flight is read from the partitions the sweep
// found and the last hours' alone; a delivery made after the sweep for an older email's event
// marks its partition itself, so it is counted at once.
test('ops.email_pipeline, ops.webhook_health and the overview read unsent mail and pending deliveries where the sweep found them', async () => {
  const p = await ctx.tenant('ops-inflight');
  const old = Date.now() - 10 * DAY;
  await ensurePartitions(sql, { from: new Date(old - 3 * DAY) });
  const insert = async (id: string, status: string) => sql`
    insert into emails (id, project_id, status, from_address, to_addresses, subject, text, created_at)
    values (${id}, ${p.projectId}, ${status}, 'a@x.test', ${['b@x.test']}, 's', 't', ${new Date(old)})`;
  await insert(at(old), 'queued');
  await sweepInflight(sql);
  const queued = async () => (await sql<{ emails: number }[]>`
    select emails::int from ops.email_pipeline where project_id = ${p.projectId} and status = 'queued'`)[0]?.emails ?? 0;
  assert.equal(await queued(), 1);
  assert.deepEqual(await inFlightCounts(sql, p.projectId), { scheduled: 0, queued: 1, sending: 0 });
  // Queued after the sweep in a partition it did not find (a hand-made id): not read while the sweep is recent.
  await insert(at(old - 2 * DAY), 'queued');
  assert.equal(await queued(), 1);
  await sql`update inflight_sweep set swept_at = now() - interval '5 minutes'`;
  assert.equal(await queued(), 2);
  assert.deepEqual(await inFlightCounts(sql, p.projectId), { scheduled: 0, queued: 2, sending: 0 });

  // An event for a sent email of an older day, recorded after the sweep: its pending delivery counts at once.
  await sql`update emails set status = 'sent' where project_id = ${p.projectId}`;
  await sweepInflight(sql);
  const wh = newId('webhook');
  await sql`insert into webhook_endpoints (id, project_id, url, secret_encrypted) values (${wh}, ${p.projectId}, 'https://x.test/h', ${Buffer.from('x')})`;
  const sentOld = at(old - DAY);
  await insert(sentOld, 'sent');
  await sql`delete from inflight_partitions`;
  await recordEvent(sql, { projectId: p.projectId, emailId: sentOld, type: 'email.opened', data: {} });
  const [health] = await sql`select pending_deliveries::int as pending from ops.webhook_health where endpoint_id = ${wh}`;
  assert.equal(health!.pending, 1);
  const oldDay = new Date(old - DAY).toISOString().slice(0, 10).replaceAll('-', '');
  const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from inflight_partitions where partition = ${`webhook_deliveries_p${oldDay}`}`;
  assert.equal(n, 1);

  // Ids of today are read from the recent partitions; an id three days ahead (made before a clock
  // was set back) from the partition the sweep found it in. Each is counted once.
  await insert(at(Date.now()), 'queued');
  await insert(at(Date.now() + 3 * DAY), 'queued');
  await sweepInflight(sql);
  assert.equal(await queued(), 2);
  assert.deepEqual(await inFlightCounts(sql, p.projectId), { scheduled: 0, queued: 2, sending: 0 });
});
