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
import { ensurePartitions, partitionDays, PARTITION_DAYS_AHEAD, unfinishedDays } from '../../src/retention/partitions.ts';
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
  // Days counted from when the migrations ran (the test database's template), which may have been
  // the day before this test runs when a run crosses midnight.
  const [{ at }] = await sql<[{ at: Date }]>`select max(date) as at from graphile_migrate.migrations`;
  const days = await partitionDays(sql);
  for (let i = 0; i <= PARTITION_DAYS_AHEAD; i++) assert.ok(days.includes(utcDay(at.getTime() + i * DAY_MS)), `day +${i}`);
  assert.equal((await tablesOf(utcDay(at.getTime()))).length, 4);

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

  // The late events' webhook deliveries went out (a day with one pending stays: §18.5).
  await sql`update webhook_deliveries set status = 'delivered' where project_id = ${t.projectId} and status = 'pending'`;
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

/** A day `age` days back with one email of `projectId`, its event, webhook delivery, tag entry and idempotency key. */
async function oldDay(projectId: string, age: number) {
  const at = Date.parse(utcDay(Date.now() - age * DAY_MS)) + 3_600_000;
  await makeDays([utcDay(at)]);
  const endpoint = newId('webhook');
  await sql`insert into webhook_endpoints (id, project_id, url, secret_encrypted)
    values (${endpoint}, ${projectId}, 'https://hooks.example.test/h', ${Buffer.from('x')})`;
  const id = idAt('email_', at);
  await sql`insert into emails (id, project_id, status, from_address, to_addresses, subject, text, tags, created_at)
    values (${id}, ${projectId}, 'sent', 'a@x.test', ${['b@x.test']}, 'old', 't', '[{"name":"age","value":"old"}]', ${new Date(at)})`;
  const evt = idAt('evt_', at + 1000);
  await sql`insert into events (id, project_id, email_id, type, created_at) values (${evt}, ${projectId}, ${id}, 'email.sent', ${new Date(at + 1000)})`;
  await sql`insert into webhook_deliveries (id, project_id, endpoint_id, event_id, email_id, status, created_at)
    values (${idAt('whd_', at + 2000)}, ${projectId}, ${endpoint}, ${evt}, ${id}, 'delivered', ${new Date(at + 2000)})`;
  await sql`insert into idempotency_keys (project_id, idempotency_key, fingerprint, email_id, created_at)
    values (${projectId}, ${`key-${id}`}, ${Buffer.from('f')}, ${id}, ${new Date(at)})`;
  await rebuildStats(sql);
  return { day: utcDay(at), id };
}

/** A transaction on its own connection, left open (having used `emails`) until `release()`. */
async function openTransaction(work: (tx: postgres.TransactionSql) => Promise<unknown>) {
  const conn = postgres(ctx.url, { max: 1, onnotice: () => {} });
  let release!: () => void;
  const released = new Promise<void>((r) => { release = r; });
  let opened!: () => void;
  const isOpen = new Promise<void>((r) => { opened = r; });
  const done = conn.begin(async (tx) => {
    await work(tx);
    opened();
    await released;
  });
  await isOpen;
  return { async end() { release(); await done; await conn.end(); } };
}

const pendingDetach = async (day: string) => (await sql`
  select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
  where i.inhdetachpending and c.relname like ${`%${suffix(day)}`}`).map((r) => r.name as string);

test('removing a day waits for a long transaction before it without holding up sends, reads or events meanwhile', async () => {
  const t = await ctx.tenant('long transaction');
  const { day, id } = await oldDay(t.projectId, 100);
  // A long transaction that wrote and read emails and read events (a send's, a report's) is open when retention starts.
  const held = await openTransaction(async (tx) => {
    const heldId = newId('email');
    await tx`insert into emails (id, project_id, status, from_address, to_addresses, subject, text)
      values (${heldId}, ${t.projectId}, 'queued', 'a@x.test', ${['b@x.test']}, 'held', 't')`;
    await tx`insert into email_recipients (project_id, address, email_id) values (${t.projectId}, 'b@x.test', ${heldId})`;
    await tx`insert into recipient_days (project_id, address, day)
      select project_id, address, mailroom_partition_day(tableoid::regclass::text) from email_recipients where email_id = ${heldId} on conflict do nothing`;
    await tx`select count(*) from emails where project_id = ${t.projectId}`;
    await tx`select count(*) from events where project_id = ${t.projectId}`;
  });
  let run: ReturnType<typeof applyRetention> | undefined;
  try {
    run = applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 36_500 });
    // The detach is under way: the first table is pending, waiting for the open transaction.
    const started = Date.now();
    while (!(await pendingDetach(day)).length) {
      assert.ok(Date.now() - started < 10_000, 'the removal starts');
      await new Promise((r) => setTimeout(r, 20));
    }
    const timed = async <T>(what: string, work: () => Promise<T>) => {
      const t0 = Date.now();
      const value = await work();
      assert.ok(Date.now() - t0 < 1_000, `${what} waited ${Date.now() - t0} ms`);
      return value;
    };
    const res = await timed('a send', () => ctx.call(t.key, '/v1/emails', { method: 'POST', body: { from: 'app@acme.test', to: 'x@example.net', subject: 's', text: 't' } }));
    assert.equal(res.status, 201);
    const { id: sent } = (await res.json()) as { id: string };
    await timed('an event', () => recordEvent(sql, { projectId: t.projectId, emailId: sent, type: 'email.sent', data: {} }));
    await timed('a list page', () => ctx.call(t.key, '/v1/emails'));
    await timed('a read of the old email', () => sql`select id from emails where id = ${id} and project_id = ${t.projectId}`);
    // The day's emails went out of sight first: a late event about one is not recorded, and does not fail.
    assert.equal(await timed('a late event of the day', () => recordEvent(sql, { projectId: t.projectId, emailId: id, type: 'email.opened', data: {} })), undefined);
    // Nothing takes or waits for a lock on the parents that a send or read would queue behind.
    for (let i = 0; i < 15; i++) {
      const strong = await sql`select l.relation::regclass::text as rel, l.mode, l.granted from pg_locks l
        where l.relation in ('emails'::regclass, 'events'::regclass, 'webhook_deliveries'::regclass, 'email_tags'::regclass)
          and l.database = (select oid from pg_database where datname = current_database())
          and l.mode not in ('AccessShareLock', 'RowShareLock', 'RowExclusiveLock', 'ShareUpdateExclusiveLock')`;
      assert.deepEqual([...strong], []);
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal((await tablesOf(day)).length, 4, 'the day waits for the transaction');
  } finally {
    await held.end();
  }
  const result = await run;
  assert.equal(result.more, false);
  assert.ok(result.emails_removed >= 1);
  assert.deepEqual(await tablesOf(day), []);
  assert.equal((await sql`select count(*)::int as n from idempotency_keys where email_id = ${id}`)[0]!.n, 0);
  await assertDerivedMatchBaseRows(sql, 'after the day went');
});

test('removing a day takes no lock on projects or endpoints: a transaction that read them (as every send does) holds nothing up', async () => {
  const t = await ctx.tenant('projects read');
  const { day } = await oldDay(t.projectId, 100);
  const held = await openTransaction(async (tx) => {
    await tx`select id from projects where id = ${t.projectId}`;
    await tx`select id from webhook_endpoints where project_id = ${t.projectId}`;
  });
  try {
    const t0 = Date.now();
    const result = await applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 36_500 });
    assert.equal(result.more, false, 'the day was removed in this run');
    assert.ok(Date.now() - t0 < 5_000, `the removal took ${Date.now() - t0} ms`);
    assert.deepEqual(await tablesOf(day), []);
  } finally {
    await held.end();
  }
});

test('deleting a project or an endpoint by hand still takes their rows along', async () => {
  const t = await ctx.tenant('deleted by hand');
  const { id } = await oldDay(t.projectId, 3);
  const [endpoint] = await sql<{ id: string }[]>`select id from webhook_endpoints where project_id = ${t.projectId}`;
  await sql`delete from webhook_endpoints where id = ${endpoint!.id}`;
  assert.equal((await sql`select 1 from webhook_deliveries where email_id = ${id}`).length, 0);
  assert.equal((await sql`select 1 from events where email_id = ${id}`).length, 1);
  await sql`delete from projects where id = ${t.projectId}`;
  for (const table of ['emails', 'events', 'email_tags', 'webhook_deliveries']) {
    assert.equal((await sql`select 1 from ${sql(table)} where project_id = ${t.projectId}`).length, 0, table);
  }
});

test('a removal stopped halfway is finished by the next run: a detached table and a pending detach, counters exact', async () => {
  const t = await ctx.tenant('stopped');
  const { day, id } = await oldDay(t.projectId, 100);
  // As a run stopped halfway leaves a day: its events detached, its deliveries pending detach
  // (the detach was cancelled while it waited for a transaction), tags and emails still attached.
  await sql.unsafe(`alter table events detach partition events${suffix(day)}`);
  const held = await openTransaction((tx) => tx`select count(*) from webhook_deliveries where project_id = ${t.projectId}`);
  try {
    const conn = await sql.reserve();
    try {
      await conn`set statement_timeout = '300ms'`;
      await assert.rejects(conn.unsafe(`alter table webhook_deliveries detach partition webhook_deliveries${suffix(day)} concurrently`),
        (err: { code?: string }) => err.code === '57014');
      await conn`reset statement_timeout`;
    } finally {
      conn.release();
    }
  } finally {
    await held.end();
  }
  assert.deepEqual(await pendingDetach(day), [`webhook_deliveries${suffix(day)}`]);
  assert.deepEqual(await unfinishedDays(sql), [day]);
  assert.equal((await sql`select count(*)::int as n from events where email_id = ${id}`)[0]!.n, 0, 'its events are out of sight');

  // Whatever the settings now, the day is finished: nothing of it is left and the counters are exact.
  const run = await applyRetention(sql, { retentionDays: 36_500, bodyRetentionDays: 36_500 });
  assert.equal(run.emails_removed, 1);
  assert.deepEqual(await tablesOf(day), []);
  assert.deepEqual(await unfinishedDays(sql), []);
  assert.equal((await sql`select count(*)::int as n from idempotency_keys where email_id = ${id}`)[0]!.n, 0);
  await assertDerivedMatchBaseRows(sql, 'after the stopped removal was finished');
  assert.equal((await applyRetention(sql, { retentionDays: 36_500, bodyRetentionDays: 36_500 })).emails_removed, 0);
});

test('a run that cannot finish a day within its time leaves it pending and out of sight, and the next run finishes it', async () => {
  const t = await ctx.tenant('out of time');
  const { day, id } = await oldDay(t.projectId, 100);
  const held = await openTransaction((tx) => tx`select count(*) from emails where project_id = ${t.projectId}`);
  try {
    const started = Date.now();
    const result = await applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 36_500 }, { untilMs: Date.now() + 500 });
    assert.equal(result.more, true);
    assert.ok(Date.now() - started < 10_000, `the run took ${Date.now() - started} ms`);
    // Only emails waits for the transaction, which used it alone; its other tables are detached already.
    assert.deepEqual(await pendingDetach(day), [`emails${suffix(day)}`]);
    assert.equal((await sql`select count(*)::int as n from emails where id = ${id}`)[0]!.n, 0, 'new reads no longer see the day');
  } finally {
    await held.end();
  }
  const next = await applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 36_500 });
  assert.equal(next.emails_removed, 1);
  assert.deepEqual(await tablesOf(day), []);
  await assertDerivedMatchBaseRows(sql, 'after the next run');
});

test('making a day of partitions does not wait for open transactions that write and read the tables', async () => {
  const t = await ctx.tenant('making days');
  const ahead = utcDay(Date.now() + 5 * DAY_MS);
  await sql.unsafe(['webhook_deliveries', 'events', 'email_tags', 'emails'].map((x) => `drop table ${x}${suffix(ahead)}`).join(';'));
  const held = await openTransaction(async (tx) => {
    const id = newId('email');
    await tx`insert into emails (id, project_id, status, from_address, to_addresses, subject, text)
      values (${id}, ${t.projectId}, 'queued', 'a@x.test', ${['b@x.test']}, 'held', 't')`;
    await tx`insert into events (id, project_id, email_id, type) values (${newId('event')}, ${t.projectId}, ${id}, 'email.sent')`;
    await tx`select count(*) from email_tags where project_id = ${t.projectId}`;
    await tx`select count(*) from webhook_deliveries where project_id = ${t.projectId}`;
  });
  try {
    const started = Date.now();
    // Its locks are had at once (each within 100 ms, or the day is skipped and none made).
    assert.equal(await ensurePartitions(sql), 4);
    assert.ok(Date.now() - started < 2_000);
  } finally {
    await held.end();
  }
  assert.equal((await tablesOf(ahead)).length, 4);
  const [bounds] = await sql`select count(*)::int as n from pg_constraint where conname like '%_bounds'`;
  assert.equal(bounds!.n, 0, 'the CHECK that spared the scan is gone once attached');
  const id = idAt('email_', Date.parse(ahead) + 1);
  await sql`insert into emails (id, project_id, status, from_address, to_addresses, subject, text)
    values (${id}, ${t.projectId}, 'queued', 'a@x.test', ${['b@x.test']}, 'ahead', 't')`;
  const [where] = await sql`select tableoid::regclass::text as part from emails where id = ${id}`;
  assert.equal(where!.part, `emails${suffix(ahead)}`);
  await sql`delete from emails where id = ${id}`;
});

test('bodies are purged a partition at a time: whole days past BODY_RETENTION_DAYS, the day at the cutoff by created_at, nothing newer', async () => {
  const t = await ctx.tenant('bodies');
  const now = Date.now();
  const cutoff = now - 30 * DAY_MS;
  // Emails made at these times, each in its own day's partition (ids and created_at agree).
  const times = {
    wholeDayPast: Date.parse(utcDay(cutoff - 10 * DAY_MS)) + 3_600_000,
    dayBeforeCutoff: Date.parse(utcDay(cutoff - DAY_MS)) + 23 * 3_600_000,
    justBeforeCutoff: cutoff - 60_000,
    justAfterCutoff: cutoff + 60_000,
    recent: now - 20 * DAY_MS,
  };
  await makeDays([...new Set(Object.values(times).map(utcDay))]);
  const ids: Record<string, string> = {};
  const RAW = Buffer.from('Subject: raw\r\n\r\nbody\r\n');
  for (const [name, at] of Object.entries(times)) {
    ids[name] = idAt('email_', at);
    await sql`insert into emails (id, project_id, status, from_address, to_addresses, subject, html, text, attachments, raw_message, created_at)
      values (${ids[name]!}, ${t.projectId}, 'sent', 'a@x.test', ${['b@x.test']}, ${name}, '<p>b</p>', 'b',
        '[{"filename":"a.txt","content":"YQ=="}]', ${RAW}, ${new Date(at)})`;
  }
  // An email of today whose created_at was set back by hand is purged by created_at too.
  const setBack = newId('email');
  await sql`insert into emails (id, project_id, status, from_address, to_addresses, subject, html, text, raw_message, created_at)
    values (${setBack}, ${t.projectId}, 'sent', 'a@x.test', ${['b@x.test']}, 'set back', '<p>b</p>', 'b', ${Buffer.from('raw')}, ${new Date(cutoff - DAY_MS)})`;

  const run = await applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 30 });
  assert.ok(run.bodies_purged >= 4, `purged ${run.bodies_purged}`);
  const rows = await sql<{ subject: string; html: string | null; text: string | null; attachments: unknown[]; rawMessage: Buffer | null; bodyPurged: boolean }[]>`
    select subject, html, text, attachments, raw_message, body_purged from emails where project_id = ${t.projectId}`;
  const purged = Object.fromEntries(rows.map((r) => [r.subject, r.bodyPurged]));
  assert.deepEqual(purged, { wholeDayPast: true, dayBeforeCutoff: true, justBeforeCutoff: true, justAfterCutoff: false, recent: false, 'set back': true });
  for (const r of rows) {
    if (r.bodyPurged) assert.deepEqual([r.html, r.text, r.attachments, r.rawMessage], [null, null, [], null], r.subject);
    else assert.deepEqual([r.html, r.text, r.attachments.length, r.rawMessage?.length], ['<p>b</p>', 'b', 1, RAW.length], r.subject);
  }
  const again = await applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 30 });
  assert.equal(again.bodies_purged, 0);
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
