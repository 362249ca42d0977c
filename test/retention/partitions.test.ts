import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { encodeTime } from 'ulid';
import postgres from 'postgres';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { assertDerivedMatchBaseRows } from '../helpers/derived.ts';
import { recordEvent } from '../../src/events/record.ts';
import { applyRetention } from '../../src/retention/apply.ts';
import { ensurePartitions, partitionDays, PARTITION_DAYS_AHEAD } from '../../src/retention/partitions.ts';
import { rebuildStats } from '../../src/stats/rebuild.ts';
import { newId } from '../../src/platform/ids.ts';

const ctx = await createTestContext();
const sql = ctx.sql;
const DAY_MS = 86_400_000;
const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const suffix = (day: string) => `_p${day.replaceAll('-', '')}`;

/** An id of `prefix` made at `ms`, as newId would have spelled it then. */
function idAt(prefix: string, ms: number) {
  const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  return prefix + encodeTime(ms, 10) + Array.from(randomBytes(16), (b) => alphabet[b % 32]).join('');
}

/** The partitions of days long past, as the migration makes them for an existing database's history. */
async function makeDays(days: string[]) {
  for (const day of days) await sql`select mailroom_ensure_partitions(${day}::date, ${day}::date)`;
}

const tablesOf = async (day: string) => {
  const rows = await sql<{ name: string }[]>`
    select c.relname as name from pg_class c where c.relname in ${sql(['emails', 'events', 'webhook_deliveries', 'email_tags'].map((t) => t + suffix(day)))}
    order by 1`;
  return rows.map((r) => r.name);
};

test('the migration makes today and the days ahead; the worker at start and each retention run keep them ahead', async () => {
  const today = utcDay(Date.now());
  const days = await partitionDays(sql);
  for (let i = 0; i <= PARTITION_DAYS_AHEAD; i++) assert.ok(days.includes(utcDay(Date.now() + i * DAY_MS)), `day +${i}`);
  assert.equal((await tablesOf(today)).length, 4);

  // A day ahead that went missing is made again by the next retention run, and only it.
  const ahead = utcDay(Date.now() + 3 * DAY_MS);
  await sql.unsafe(['webhook_deliveries', 'events', 'email_tags', 'emails'].map((t) => `drop table ${t}${suffix(ahead)}`).join(';'));
  await applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 30 });
  assert.equal((await tablesOf(ahead)).length, 4);
  assert.equal(await ensurePartitions(sql), 0, 'nothing left to make');
});

test('a send on a new day finds its partition, and the worker makes missing days ahead at start', async () => {
  const t = await ctx.tenant('new day');
  // An email made just after midnight tomorrow, as the service will make one then.
  const tomorrow = utcDay(Date.now() + DAY_MS);
  const id = idAt('email_', Date.parse(tomorrow) + 1);
  await sql`insert into emails (id, project_id, status, from_address, to_addresses, subject, text)
    values (${id}, ${t.projectId}, 'queued', 'a@x.test', ${['b@x.test']}, 'tomorrow', 't')`;
  const [where] = await sql`select tableoid::regclass::text as part from emails where id = ${id}`;
  assert.equal(where!.part, `emails${suffix(tomorrow)}`);
  await recordEvent(sql, { projectId: t.projectId, emailId: id, type: 'email.sent', data: {} });
  const [event] = await sql`select tableoid::regclass::text as part from events where email_id = ${id}`;
  assert.equal(event!.part, `events${suffix(tomorrow)}`, "an email's events live in its day's partition");
  await sql`delete from events where email_id = ${id}`;
  await sql`delete from emails where id = ${id}`;
  await rebuildStats(sql);

  // As if no worker had run for days: the days ahead are missing, and the worker's start makes them.
  const ahead = [2, 3, 4].map((n) => utcDay(Date.now() + n * DAY_MS));
  for (const day of ahead) await sql.unsafe(['webhook_deliveries', 'events', 'email_tags', 'emails'].map((x) => `drop table ${x}${suffix(day)}`).join(';'));
  const worker = await startTestWorker(ctx.config, sql);
  await worker.stop();
  for (const day of ahead) assert.equal((await tablesOf(day)).length, 4, day);
  const res = await ctx.call(t.key, '/v1/emails', { method: 'POST', body: { from: 'app@acme.test', to: 'x@example.net', subject: 's', text: 't' } });
  assert.equal(res.status, 201);
  const { id: accepted } = (await res.json()) as { id: string };
  const [today] = await sql`select tableoid::regclass::text as part from emails where id = ${accepted}`;
  assert.equal(today!.part, `emails${suffix(utcDay(Date.now()))}`);
});

test('retention drops whole days past RETENTION_DAYS with their events, deliveries, tags and keys, and leaves the counters exact', async () => {
  const t = await ctx.tenant('whole days');
  const endpoint = newId('webhook');
  await sql`insert into webhook_endpoints (id, project_id, url, secret_encrypted)
    values (${endpoint}, ${t.projectId}, 'https://hooks.example.test/h', ${Buffer.from('x')})`;
  const now = Date.now();
  const ages = [120, 100, 95, 91, 89];
  await makeDays(ages.map((age) => utcDay(now - age * DAY_MS)));
  const byAge = new Map<number, string[]>();
  for (const age of ages) {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      // An hour into the day, whatever the time now: the day is what retention goes by.
      const at = Date.parse(utcDay(now - age * DAY_MS)) + 3_600_000 + i * 60_000;
      const id = idAt('email_', at);
      ids.push(id);
      await sql`insert into emails (id, project_id, status, from_address, to_addresses, subject, text, tags, created_at)
        values (${id}, ${t.projectId}, 'sent', 'a@x.test', ${['b@x.test']}, ${`age ${age}`}, 't', '[{"name":"age","value":"old"}]', ${new Date(at)})`;
      const evt = idAt('evt_', at + 1000);
      await sql`insert into events (id, project_id, email_id, type, created_at) values (${evt}, ${t.projectId}, ${id}, 'email.sent', ${new Date(at + 1000)})`;
      await sql`insert into webhook_deliveries (id, project_id, endpoint_id, event_id, email_id, status, created_at)
        values (${idAt('whd_', at + 2000)}, ${t.projectId}, ${endpoint}, ${evt}, ${id}, 'delivered', ${new Date(at + 2000)})`;
      await sql`insert into idempotency_keys (project_id, idempotency_key, fingerprint, email_id, created_at)
        values (${t.projectId}, ${`key-${id}`}, ${Buffer.from('f')}, ${id}, ${new Date(at)})`;
    }
    byAge.set(age, ids);
  }
  await rebuildStats(sql);
  // Late events, recorded today for emails whose days go: counted today, and taken off today.
  for (const age of ages) await recordEvent(sql, { projectId: t.projectId, emailId: byAge.get(age)![0]!, type: 'email.opened', data: {} });
  await assertDerivedMatchBaseRows(sql, 'before');
  const [openedToday] = await sql`select sum(n)::int as n from project_daily_counts
    where project_id = ${t.projectId} and metric = 'email.opened' and day = (now() at time zone 'UTC')::date`;
  assert.equal(openedToday!.n, ages.length);

  // Two runs at once (the worker's and the CLI's) share the work: each day goes once.
  const runs = await Promise.all([1, 2].map(() => applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 36_500 })));
  assert.equal(runs[0]!.emails_removed + runs[1]!.emails_removed, 12, 'the days of 120, 100, 95 and 91 days ago');
  for (const age of [120, 100, 95, 91]) {
    assert.deepEqual(await tablesOf(utcDay(now - age * DAY_MS)), [], `the day ${age} days ago is dropped`);
  }
  assert.equal((await tablesOf(utcDay(now - 89 * DAY_MS))).length, 4, 'the day 89 days ago stays');
  const left = await sql`select
    (select count(*)::int from emails where project_id = ${t.projectId}) as emails,
    (select count(*)::int from events where project_id = ${t.projectId} and type = 'email.sent') as events,
    (select count(*)::int from webhook_deliveries where project_id = ${t.projectId}) as deliveries,
    (select count(*)::int from email_tags where project_id = ${t.projectId}) as tags,
    (select count(*)::int from idempotency_keys where project_id = ${t.projectId}) as keys`;
  assert.deepEqual(left[0], { emails: 3, events: 3, deliveries: 4, tags: 3, keys: 3 }, 'the kept day: its late event went to the endpoint too');
  assert.deepEqual((await sql`select id from emails where project_id = ${t.projectId} order by id`).map((r) => r.id), byAge.get(89));
  await assertDerivedMatchBaseRows(sql, 'after dropping the days');
  const [openedAfter] = await sql`select sum(n)::int as n from project_daily_counts
    where project_id = ${t.projectId} and metric = 'email.opened' and day = (now() at time zone 'UTC')::date`;
  assert.equal(openedAfter!.n, 1, 'only the late event of the kept day is still counted today');

  const again = await applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 36_500 });
  assert.equal(again.emails_removed, 0);
});

test('a drop that cannot have its lock soon gives up, leaves the day for the next run, and does not hold up reads meanwhile', async () => {
  const t = await ctx.tenant('busy');
  const at = Date.now() - 100 * DAY_MS;
  await makeDays([utcDay(at)]);
  const id = idAt('email_', at);
  await sql`insert into emails (id, project_id, status, from_address, to_addresses, subject, text, created_at)
    values (${id}, ${t.projectId}, 'sent', 'a@x.test', ${['b@x.test']}, 'busy', 't', ${new Date(at)})`;
  // A long read of emails (a report, a dashboard page) holds the table while retention runs.
  const reader = postgres(ctx.url, { max: 1, onnotice: () => {} });
  let release!: () => void;
  const released = new Promise<void>((r) => { release = r; });
  let reading!: () => void;
  const isReading = new Promise<void>((r) => { reading = r; });
  const held = reader.begin(async (tx) => {
    await tx`select count(*) from emails where project_id = ${t.projectId}`;
    reading();
    await released;
  });
  try {
    await isReading;
    const started = Date.now();
    const blocked = applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 36_500 });
    // Meanwhile another read of emails is not queued behind the drop for longer than its lock timeout.
    await new Promise((r) => setTimeout(r, 100));
    const readStarted = Date.now();
    await sql`select count(*) from emails where id = ${id} and project_id = ${t.projectId}`;
    assert.ok(Date.now() - readStarted < 2_000, `a read waited ${Date.now() - readStarted} ms`);
    const result = await blocked;
    assert.ok(Date.now() - started < 10_000, 'the run gives up after a few tries');
    assert.equal(result.more, true);
    assert.equal((await tablesOf(utcDay(at))).length, 4, 'the day is still there');
  } finally {
    release();
    await held;
    await reader.end();
  }
  const next = await applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 36_500 });
  assert.ok(next.emails_removed >= 1);
  assert.deepEqual(await tablesOf(utcDay(at)), []);
});

test('dedupe holds on the partitioned tables: a repeated SES event and a second first delivery are refused', async () => {
  const t = await ctx.tenant('dedupe');
  const res = await ctx.call(t.key, '/v1/emails', { method: 'POST', body: { from: 'app@acme.test', to: 'x@example.net', subject: 's', text: 't' } });
  const { id } = (await res.json()) as { id: string };
  const first = await recordEvent(sql, { projectId: t.projectId, emailId: id, type: 'email.delivered', data: {}, dedupeKey: 'ses-1' });
  const repeat = await recordEvent(sql, { projectId: t.projectId, emailId: id, type: 'email.delivered', data: {}, dedupeKey: 'ses-1' });
  assert.ok(first);
  assert.equal(repeat, undefined);
  const endpoint = newId('webhook');
  await sql`insert into webhook_endpoints (id, project_id, url, secret_encrypted) values (${endpoint}, ${t.projectId}, 'https://h.test/x', ${Buffer.from('x')})`;
  const insert = () => sql`insert into webhook_deliveries (id, project_id, endpoint_id, event_id, email_id)
    values (${newId('delivery')}, ${t.projectId}, ${endpoint}, ${first!}, ${id})`;
  await insert();
  await assert.rejects(insert(), (err: { code?: string }) => err.code === '23505');
});

test('day bounds order ids the same under the C collation and a linguistic one, so the partitions hold whatever the database collation', async () => {
  const [icu] = await sql`select count(*)::int as n from pg_collation where collname = 'en-US-x-icu'`;
  const collations = icu!.n ? ['C', 'en-US-x-icu'] : ['C'];
  const ms = Date.now();
  const ids = [idAt('email_', ms), idAt('email_', ms + DAY_MS), idAt('email_', ms - 1), idAt('email_', 0), idAt('email_', 2 ** 48 - 1)];
  const bounds = await sql<{ b: string }[]>`select mailroom_id_floor('email_', d::timestamp at time zone 'UTC') as b
    from generate_series(${utcDay(ms - DAY_MS)}::date, ${utcDay(ms + 2 * DAY_MS)}::date, interval '1 day') d`;
  const values = [...ids, ...bounds.map((r) => r.b)];
  const orders = await Promise.all(collations.map(async (c) => (await sql.unsafe(
    `select v from unnest($1::text[]) v order by v collate "${c}"`, [values])).map((r) => r.v as string)));
  for (const order of orders) assert.deepEqual(order, orders[0]);
});
