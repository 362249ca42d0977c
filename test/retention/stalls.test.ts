import { test, mock } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { encodeTime } from 'ulid';
import postgres from 'postgres';
import { createTestContext } from '../helpers/app.ts';
import { applyRetention } from '../../src/retention/apply.ts';
import { PARTITION_DAYS_AHEAD } from '../../src/retention/partitions.ts';
import { readQueueFrom, renderMetrics } from '../../src/platform/metrics.ts';

// §18.6: retention never stalls and never runs ahead.
const ctx = await createTestContext();
const sql = ctx.sql;
const DAY_MS = 86_400_000;
const DEFAULTS = { retentionDays: 90, bodyRetentionDays: 30 };
const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const suffix = (day: string) => `_p${day.replaceAll('-', '')}`;

function idAt(prefix: string, ms: number) {
  const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  return prefix + encodeTime(ms, 10) + Array.from(randomBytes(16), (b) => alphabet[b % 32]).join('');
}

/** A sent email made `age` days back (an hour into its UTC day), in its own day partition, with its body. */
async function sentAt(projectId: string, age: number) {
  const at = Date.parse(utcDay(Date.now() - age * DAY_MS)) + 3_600_000;
  await sql`select mailroom_ensure_partitions(${utcDay(at)}::date, ${utcDay(at)}::date)`;
  const id = idAt('email_', at);
  await sql`insert into emails (id, project_id, status, from_address, to_addresses, subject, html, text, created_at)
    values (${id}, ${projectId}, 'sent', 'a@x.test', ${['b@x.test']}, ${`age ${age}`}, '<p>b</p>', 'b', ${new Date(at)})`;
  return { id, day: utcDay(at) };
}

const tablesOf = async (day: string) => (await sql<{ name: string }[]>`
  select relname as name from pg_class
  where relname in ${sql(['emails', 'events', 'webhook_deliveries', 'email_tags'].map((t) => t + suffix(day)))}`).length;
const purged = async (id: string) => (await sql`select body_purged from emails where id = ${id}`)[0]?.bodyPurged as boolean | undefined;

test('a day that cannot be detached delays only itself: the body purge and the counter fold go on, and the day goes later', { timeout: 60_000 }, async () => {
  const t = await ctx.tenant('stuck day');
  const old = await sentAt(t.projectId, 100);
  const body = await sentAt(t.projectId, 40);
  await sql`insert into project_daily_counts (project_id, day, metric, shard, n) values
    (${t.projectId}, (now() at time zone 'UTC')::date - 5, 'email.sent', 4242, 3)`;
  // An idle transaction that read emails and holds a lock on the old day's table (a pg_dump does as much).
  const conn = postgres(ctx.url, { max: 1, onnotice: () => {} });
  let release!: () => void;
  const released = new Promise<void>((r) => { release = r; });
  let opened!: () => void;
  const isOpen = new Promise<void>((r) => { opened = r; });
  const held = conn.begin(async (tx) => {
    await tx`select count(*) from emails where project_id = ${t.projectId}`;
    await tx.unsafe(`lock table emails${suffix(old.day)} in share mode`);
    opened();
    await released;
  });
  await isOpen;
  try {
    const started = Date.now();
    const run = await applyRetention(sql, DEFAULTS, { untilMs: Date.now() + 6_000 });
    assert.ok(Date.now() - started < 15_000, `the run took ${Date.now() - started} ms`);
    assert.equal(run.more, true, 'the day is left for a later run');
    assert.ok(run.bodies_purged >= 1, 'the purge went on');
    assert.equal(await purged(body.id), true);
    const shards = await sql`select shard from project_daily_counts where project_id = ${t.projectId}`;
    assert.deepEqual(shards.map((r) => r.shard), [0], 'the counters were folded');
    assert.equal(await tablesOf(old.day), 4, 'the day is still there');
  } finally {
    release();
    await held;
    await conn.end();
  }
  const later = await applyRetention(sql, DEFAULTS);
  assert.ok(later.emails_removed >= 1);
  assert.equal(await tablesOf(old.day), 0, 'retried and removed once the transaction ended');
});

test("retention reads the database's clock: a process clock months ahead removes and purges nothing early", async () => {
  const t = await ctx.tenant('clock ahead');
  const young = await sentAt(t.projectId, 89);
  const fresh = await sentAt(t.projectId, 5);
  mock.timers.enable({ apis: ['Date'], now: Date.now() + 200 * DAY_MS });
  try {
    await applyRetention(sql, DEFAULTS);
  } finally {
    mock.timers.reset();
  }
  assert.equal(await tablesOf(young.day), 4, 'the day 89 days back stays');
  assert.equal((await sql`select 1 from emails where id = ${young.id}`).length, 1);
  assert.equal(await purged(fresh.id), false, 'a body 5 days old stays');
  assert.equal(await purged(young.id), true, 'a body 89 days old goes, as the database clock says');
});

test('ops.retention and the metrics show the oldest day and the days ahead', async () => {
  const t = await ctx.tenant('where it stands');
  await sentAt(t.projectId, 60);
  const [row] = await sql`select oldest_day, oldest_day_age_seconds::float8 as age, days_ahead, day_partitions::int, unfinished_days::int,
    oldest_unsent_created_at, next_pending_delivery_at from ops.retention`;
  const oldest = (await sql`select min(to_date(substr(relname, 9), 'YYYYMMDD'))::text as d from pg_class where relname ~ '^emails_p[0-9]{8}$'`)[0]!.d as string;
  assert.equal(utcDay(new Date(row!.oldestDay as Date).getTime()), oldest);
  assert.ok(Math.abs((row!.age as number) - (Date.now() - Date.parse(oldest)) / 1000) < 60, `age ${row!.age}`);
  assert.equal(row!.daysAhead, PARTITION_DAYS_AHEAD);
  assert.equal(row!.unfinishedDays, 0);
  readQueueFrom(sql);
  const text = await renderMetrics();
  const age = Number(/^mailroom_retention_oldest_day_age_seconds (\S+)$/m.exec(text)?.[1]);
  assert.ok(Math.abs(age - (Date.now() - Date.parse(oldest)) / 1000) < 60, text.slice(0, 200));
  assert.match(text, new RegExp(`^mailroom_partitions_days_ahead ${PARTITION_DAYS_AHEAD}$`, 'm'));
});
