import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext, TEST_SECRET_KEY } from '../helpers/app.ts';
import { runCli } from '../helpers/process.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';
import { assertDerivedMatchBaseRows } from '../helpers/derived.ts';
import { recordEvent, type EventType } from '../../src/events/record.ts';
import { addSuppressions } from '../../src/suppressions/queries.ts';
import { applyRetention } from '../../src/retention/apply.ts';
import { removeExpiredEmails } from '../../src/retention/queries.ts';
import { dailyActivity } from '../../src/projects/activity.ts';
import { newId } from '../../src/platform/ids.ts';
import { encodeTime } from 'ulid';

const ctx = await createTestContext();
const sql = ctx.sql;
const cliEnv = { DATABASE_URL: ctx.url, SECRET_KEY: TEST_SECRET_KEY, LOG_LEVEL: 'silent' };
const DEFAULTS = { retentionDays: 90, bodyRetentionDays: 30 };

async function endpoint(projectId: string) {
  await sql`insert into webhook_endpoints (id, project_id, url, secret_encrypted)
    values (${newId('webhook')}, ${projectId}, 'https://hooks.example.test/h', ${Buffer.from('x')})`;
}

/** An email accepted through the API, with bodies, an attachment, tags and an idempotency key. */
async function accept(key: string, n: string) {
  const res = await ctx.call(key, '/v1/emails', {
    method: 'POST',
    headers: { 'idempotency-key': `key-${n}-${Math.random()}` },
    body: {
      from: 'app@acme.test', to: `user-${n}@example.net`, subject: `Email ${n}`, html: `<p>${n}</p>`, text: n,
      attachments: [{ filename: 'a.txt', content: Buffer.from('attached').toString('base64') }],
      tags: [{ name: 'n', value: n }, { name: 'kind', value: 'retention' }],
    },
  });
  assert.equal(res.status, 201, await res.clone().text());
  return ((await res.json()) as { id: string }).id;
}

async function events(projectId: string, emailId: string, types: EventType[]) {
  for (const type of types) await recordEvent(sql, { projectId, emailId, type, data: {} });
}

/** Every email of the projects sent and every webhook delivery delivered, as long after the fact. */
async function sent(...projectIds: string[]) {
  await sql`update emails set status = 'sent' where project_id in ${sql(projectIds)}`;
  await sql`update webhook_deliveries set status = 'delivered' where project_id in ${sql(projectIds)}`;
}

const age = (id: string, days: number) => sql`update emails set created_at = now() - make_interval(days => ${days}) where id = ${id}`;

/** A table's rows as JSON, without the key's last use (the API's own calls move it). */
async function tableDump(table: string) {
  return sql.unsafe(`select to_jsonb(t) - 'last_used_at' as row from ${table} t order by 1::text`);
}

test('retention removes emails past RETENTION_DAYS with their events and deliveries, purges bodies past BODY_RETENTION_DAYS, and touches nothing else', async () => {
  const a = await ctx.tenant('kept tables');
  const b = await ctx.tenant('other project');
  await endpoint(a.projectId);
  const old = await accept(a.key, 'old');
  const oldOther = await accept(b.key, 'old-other');
  const edge = await accept(a.key, 'edge'); // 89 days: kept, bodies purged
  const mid = await accept(a.key, 'mid');
  const fresh = await accept(a.key, 'fresh');
  for (const id of [old, edge, mid, fresh]) await events(a.projectId, id, ['email.sent', 'email.delivered']);
  await events(b.projectId, oldOther, ['email.sent', 'email.bounced']);
  await addSuppressions(sql, a.projectId, ['user-old@example.net'], 'bounced', old);
  await sql`insert into domains (id, project_id, value, region) values (${newId('domain')}, ${a.projectId}, 'retention.test', 'us-east-1')`;
  await age(old, 91);
  await age(oldOther, 200);
  await age(edge, 89);
  await age(mid, 31);
  // Sent long ago and told to the webhooks: unsent mail and pending deliveries stay (§18.5, unsent.test.ts).
  await sent(a.projectId, b.projectId);
  // As the SMTP relay keeps a submitted message: a body too.
  await sql`update emails set raw_message = ${Buffer.from('Subject: raw\r\n\r\nraw body\r\n')} where id in ${sql([mid, fresh])}`;
  const [oldDeliveries] = await sql`select count(*)::int as n from webhook_deliveries d join events e on e.id = d.event_id where e.email_id = ${old}`;
  assert.ok(oldDeliveries!.n > 0, 'the old email has webhook deliveries');

  const untouched = ['projects', 'api_keys', 'domains', 'suppressions', 'webhook_endpoints'];
  const before = Object.fromEntries(await Promise.all(untouched.map(async (t) => [t, await tableDump(t)] as const)));
  const [freshBefore] = await sql`select to_jsonb(e) as row from emails e where id = ${fresh}`;
  const keptEvents = await sql`select id from events where email_id in ${sql([edge, mid, fresh])} order by id`;

  const run = await runCli(['retention', 'run'], cliEnv);
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(run.json(), { emails_removed: 2, bodies_purged: 2 });
  for (const t of untouched) assert.deepEqual(await tableDump(t), before[t], `${t} untouched`);

  for (const [key, id] of [[a.key, old], [b.key, oldOther]] as const) {
    assert.equal((await ctx.call(key, `/v1/emails/${id}`)).status, 404);
  }
  const left = await sql`
    select (select count(*)::int from events where email_id in ${sql([old, oldOther])}) as events,
           (select count(*)::int from webhook_deliveries d where not exists (select 1 from events e where e.id = d.event_id)) as orphan_deliveries,
           (select count(*)::int from idempotency_keys where email_id in ${sql([old, oldOther])}) as keys,
           (select count(*)::int from email_tags where email_id in ${sql([old, oldOther])}) as tags`;
  assert.deepEqual(left[0], { events: 0, orphanDeliveries: 0, keys: 0, tags: 0 });

  for (const id of [mid, edge]) {
    const shown = (await (await ctx.call(a.key, `/v1/emails/${id}`)).json()) as Record<string, unknown>;
    assert.equal(shown.body_purged, true, id);
    assert.equal(shown.html, null);
    assert.equal(shown.text, null);
    assert.equal(shown.subject, id === mid ? 'Email mid' : 'Email edge', 'the rest of the email stays');
    const [row] = await sql`select attachments, tags, raw_message from emails where id = ${id}`;
    assert.deepEqual(row!.attachments, []);
    assert.equal(row!.rawMessage, null);
    assert.equal((row!.tags as unknown[]).length, 2);
  }
  const freshShown = (await (await ctx.call(a.key, `/v1/emails/${fresh}`)).json()) as Record<string, unknown>;
  assert.equal(freshShown.body_purged, false);
  assert.equal(freshShown.html, '<p>fresh</p>');
  const [freshAfter] = await sql`select to_jsonb(e) as row from emails e where id = ${fresh}`;
  assert.deepEqual(freshAfter!.row, freshBefore!.row, 'a fresh email is untouched');
  assert.deepEqual(await sql`select id from events where email_id in ${sql([edge, mid, fresh])} order by id`, keptEvents);
  const list = (await (await ctx.call(a.key, '/v1/emails?tag=kind:retention')).json()) as { data: { id: string }[] };
  assert.deepEqual(list.data.map((e) => e.id).sort(), [edge, mid, fresh].sort());
  await assertDerivedMatchBaseRows(sql, 'after retention');

  const again = await runCli(['retention', 'run'], cliEnv);
  assert.deepEqual(again.json(), { emails_removed: 0, bodies_purged: 0 });
});

test('derived numbers equal direct counts after sends through the worker, provider events and retention', async () => {
  const worker = await startTestWorker(ctx.config, sql);
  const t = await ctx.tenant('sends');
  await endpoint(t.projectId);
  const ids: string[] = [];
  for (let i = 0; i < 6; i++) ids.push(await accept(t.key, `s${i}`));
  await waitFor('the sends', async () => {
    const [row] = await sql`select count(*)::int as n from emails where id in ${sql(ids)} and status = 'sent'`;
    return row!.n === ids.length;
  });
  await worker.stop();
  await events(t.projectId, ids[0]!, ['email.bounced', 'email.complained']);
  await assertDerivedMatchBaseRows(sql, 'after sends and events');
  const days = await dailyActivity(sql, t.projectId, 14);
  const today = days.at(-1)!;
  assert.deepEqual([today.sent, today.delivered, today.bounced, today.complained], [6, 6, 1, 1]);

  await age(ids[0]!, 95);
  await age(ids[1]!, 95);
  await sent(t.projectId);
  const result = await applyRetention(sql, DEFAULTS);
  assert.equal(result.emails_removed, 2);
  await assertDerivedMatchBaseRows(sql, 'after retention');
  const after = (await dailyActivity(sql, t.projectId, 14)).at(-1)!;
  assert.deepEqual([after.sent, after.delivered, after.bounced, after.complained], [4, 4, 0, 0]);
});

test('stats rebuild derives the counters and tag entries of rows loaded by hand', async () => {
  const t = await ctx.tenant('loaded by hand');
  const id = newId('email');
  await sql`insert into emails (id, project_id, status, from_address, to_addresses, subject, text, tags, created_at)
    values (${id}, ${t.projectId}, 'sent', 'a@x.test', ${['b@x.test']}, 'restored', 't', '[{"name":"restored","value":"yes"}]', now() - interval '3 days')`;
  await sql`insert into events (id, project_id, email_id, type, created_at) values
    (${newId('event')}, ${t.projectId}, ${id}, 'email.sent', now() - interval '3 days'),
    (${newId('event')}, ${t.projectId}, ${id}, 'email.delivered', now() - interval '2 days')`;
  await assert.rejects(assertDerivedMatchBaseRows(sql, 'before'), 'rows loaded by hand are not counted yet');

  const run = await runCli(['stats', 'rebuild'], cliEnv);
  assert.equal(run.code, 0, run.stderr);
  const [expected] = await sql`select
    (select count(*)::int from (select distinct project_id, (created_at at time zone 'UTC')::date, type from events) d) +
    (select count(*)::int from email_tags) + (select count(*)::int from email_recipients) +
    (select count(*)::int from (select distinct endpoint_id, date_trunc('hour', coalesce(last_attempt_at, created_at)), status from webhook_deliveries
      where status in ('delivered', 'failed') and coalesce(last_attempt_at, created_at) >= date_trunc('hour', now()) - interval '47 hours') w) as n`;
  assert.deepEqual(run.json(), { rebuilt: expected!.n });
  await assertDerivedMatchBaseRows(sql, 'after stats rebuild');
  const days = await dailyActivity(sql, t.projectId, 14);
  assert.equal(days.at(-4)!.sent, 1);
  assert.equal(days.at(-3)!.delivered, 1);
  const list = (await (await ctx.call(t.key, '/v1/emails?tag=restored:yes')).json()) as { data: { id: string }[] };
  assert.deepEqual(list.data.map((e) => e.id), [id]);
});

test('a retention step skips what a send holds, and sends, events and accepts never wait on a step', async () => {
  const t = await ctx.tenant('locks');
  await endpoint(t.projectId);
  // Sent long ago (rows written by hand: an email this old has no job left that could touch it).
  const sentLongAgo = async () => {
    const id = newId('email');
    await sql`insert into emails (id, project_id, status, from_address, to_addresses, subject, text, sent_at)
      values (${id}, ${t.projectId}, 'sent', 'a@x.test', ${['b@x.test']}, 'old', 't', now())`;
    return id;
  };
  const held = await sentLongAgo();
  const gone = await sentLongAgo();
  await events(t.projectId, held, ['email.sent']);
  await events(t.projectId, gone, ['email.sent']);
  await age(held, 100);
  await age(gone, 100);
  await sent(t.projectId);

  // A send holding the old email's row: the step passes it by instead of waiting.
  let release!: () => void;
  const released = new Promise<void>((r) => { release = r; });
  let locked!: () => void;
  const isLocked = new Promise<void>((r) => { locked = r; });
  const holder = sql.begin(async (tx) => {
    await tx`select id from emails where id = ${held} for update`;
    locked();
    await released;
  });
  await isLocked;
  const step = await Promise.race([
    applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 36_500 }),
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the step waited on a held row')), 5000)),
  ]);
  assert.equal(step.emails_removed, 1);
  release();
  await holder;
  assert.equal((await ctx.call(t.key, `/v1/emails/${held}`)).status, 200, 'the held email waits for the next step');

  // A step left open, holding every lock it takes, while the API accepts and a worker sends.
  const worker = await startTestWorker(ctx.config, sql);
  let finish!: () => void;
  const finished = new Promise<void>((r) => { finish = r; });
  let removed!: (n: number) => void;
  const stepRan = new Promise<number>((r) => { removed = r; });
  const open = sql.begin(async (tx) => {
    removed(await removeExpiredEmails(tx, new Date(Date.now() - 90 * 86_400_000)));
    await finished;
  });
  try {
    assert.equal(await stepRan, 1);
    const started = Date.now();
    const fresh = await accept(t.key, 'during');
    await waitFor('the send during an open step', async () => {
      const [row] = await sql`select status from emails where id = ${fresh}`;
      return row!.status === 'sent';
    }, 10_000).catch(async (err) => {
      const waiting = await sql`select wait_event_type, wait_event, state, left(query, 300) as query from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid() and state <> 'idle'`;
      const [row] = await sql`select status, attempt_count, last_error from emails where id = ${fresh}`;
      throw new Error(`${(err as Error).message}; email ${JSON.stringify(row)}; sessions ${JSON.stringify(waiting)}`);
    });
    await events(t.projectId, fresh, ['email.delivered']);
    assert.ok(Date.now() - started < 10_000);
  } finally {
    finish();
    await open;
  }
  await worker.stop();
  await assertDerivedMatchBaseRows(sql, 'after the open step');
});

test('mailroom_id_floor is the smallest id of its millisecond, as the ids made in Node spell it', async () => {
  for (const ms of [0, 1, 1_700_000_000_123, Date.now()]) {
    const [row] = await sql`select mailroom_id_floor('whd_', to_timestamp(${ms}::float8 / 1000)) as floor`;
    assert.equal(row!.floor, `whd_${encodeTime(ms, 10)}${'0'.repeat(16)}`, String(ms));
  }
  const id = newId('delivery');
  const [row] = await sql`select mailroom_id_floor('whd_', now() - interval '1 second') < ${id} and ${id} < mailroom_id_floor('whd_', now() + interval '1 second') as within`;
  assert.equal(row!.within, true);
});

test('retention folds the counter rows of finished days into one per project, day and type, keeping each sum', async () => {
  const t = await ctx.tenant('fold');
  await sql`insert into project_daily_counts (project_id, day, metric, shard, n) values
    (${t.projectId}, (now() at time zone 'UTC')::date - 5, 'email.sent', 0, 2),
    (${t.projectId}, (now() at time zone 'UTC')::date - 5, 'email.sent', 111, 3),
    (${t.projectId}, (now() at time zone 'UTC')::date - 5, 'email.sent', 222, -1),
    (${t.projectId}, (now() at time zone 'UTC')::date - 5, 'email.opened', 111, 7),
    (${t.projectId}, (now() at time zone 'UTC')::date, 'email.sent', 333, 4)`;
  await applyRetention(sql, DEFAULTS);
  const rows = await sql`select (day = (now() at time zone 'UTC')::date) as today, metric, shard, n::int
    from project_daily_counts where project_id = ${t.projectId} order by today, metric`;
  assert.deepEqual(rows.map((r) => [r.today, r.metric, r.shard, r.n]), [
    [false, 'email.opened', 0, 7], [false, 'email.sent', 0, 4], [true, 'email.sent', 333, 4]]);
  await sql`delete from project_daily_counts where project_id = ${t.projectId}`;
});
