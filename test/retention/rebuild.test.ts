import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { encodeTime } from 'ulid';
import { createSql } from '../../src/platform/db.ts';
import { createTestContext } from '../helpers/app.ts';
import { assertDerivedMatchBaseRows } from '../helpers/derived.ts';
import { recordEvent } from '../../src/events/record.ts';
import { rebuildStats } from '../../src/stats/rebuild.ts';
import { applyRetention } from '../../src/retention/apply.ts';

// §18.10: derived numbers rebuild without stopping traffic.
const ctx = await createTestContext();
const sql = ctx.sql;
const DAY_MS = 86_400_000;
const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);

function idAt(prefix: string, ms: number) {
  const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  return prefix + encodeTime(ms, 10) + Array.from(randomBytes(16), (b) => alphabet[b % 32]).join('');
}

const within = async <T>(what: string, ms: number, work: Promise<T>) => {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([work, new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} waited over ${ms} ms`)), ms); })]);
  } finally {
    clearTimeout(timer);
  }
};

async function accept(key: string) {
  const res = await ctx.call(key, '/v1/emails', { method: 'POST', body: { from: 'app@acme.test', to: 'x@example.net', subject: 's', text: 't', tags: [{ name: 'k', value: 'v' }] } });
  assert.equal(res.status, 201, await res.clone().text());
  return ((await res.json()) as { id: string }).id;
}

test('stats rebuild takes no lock that accepts or events wait on, and counts an event of an open transaction once', async () => {
  const t = await ctx.tenant('traffic during rebuild');
  const first = await accept(t.key);
  await recordEvent(sql, { projectId: t.projectId, emailId: first, type: 'email.sent', data: {} });
  // A transaction that recorded an event and is still open (a slow ingestion batch).
  const conn = createSql(ctx.url, { max: 1, appName: 'open-ingestion' });
  let release!: () => void;
  const released = new Promise<void>((r) => { release = r; });
  let opened!: () => void;
  const isOpen = new Promise<void>((r) => { opened = r; });
  const held = conn.begin(async (tx) => {
    await recordEvent(tx, { projectId: t.projectId, emailId: first, type: 'email.delivered', data: {} });
    opened();
    await released;
  });
  await isOpen;
  try {
    const rebuild = rebuildStats(sql);
    await new Promise((r) => setTimeout(r, 200));
    // Traffic goes on meanwhile, whatever the rebuild is doing.
    const during = await within('an accept', 2_000, accept(t.key));
    await within('an event', 2_000, recordEvent(sql, { projectId: t.projectId, emailId: during, type: 'email.sent', data: {} }));
    await within('the rebuild', 10_000, rebuild);
  } finally {
    release();
    await held;
    await conn.end();
  }
  await assertDerivedMatchBaseRows(sql, 'after the rebuild and the open transaction');
});

test('a day being removed is never counted twice: rebuilt while detached, then dropped, the counters stay exact', async () => {
  const t = await ctx.tenant('day being removed');
  const at = Date.parse(utcDay(Date.now() - 100 * DAY_MS)) + 3_600_000;
  const day = utcDay(at);
  await sql`select mailroom_ensure_partitions(${day}::date, ${day}::date)`;
  const id = idAt('email_', at);
  await sql`insert into emails (id, project_id, status, from_address, to_addresses, subject, text, created_at)
    values (${id}, ${t.projectId}, 'sent', 'a@x.test', ${['b@x.test']}, 'old', 't', ${new Date(at)})`;
  await sql`insert into email_recipients (project_id, address, email_id) values (${t.projectId}, 'b@x.test', ${id})`;
  await sql`insert into recipient_days (project_id, address, day)
    select project_id, address, mailroom_partition_day(tableoid::regclass::text) from email_recipients where email_id = ${id} on conflict do nothing`;
  await recordEvent(sql, { projectId: t.projectId, emailId: id, type: 'email.sent', data: {} });
  await assertDerivedMatchBaseRows(sql, 'before');
  // As a removal stopped halfway leaves it: its events out of sight, still on the counters.
  await sql.unsafe(`alter table events detach partition events_p${day.replaceAll('-', '')}`);
  await rebuildStats(sql);
  const run = await applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 30 });
  assert.equal(run.emails_removed, 1);
  await assertDerivedMatchBaseRows(sql, 'after the rebuild and the removal');
});
