import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { encodeTime } from 'ulid';
import { createTestContext, TEST_SECRET_KEY } from '../helpers/app.ts';
import { runCli, spawnEntry } from '../helpers/process.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { assertDerivedMatchBaseRows } from '../helpers/derived.ts';
import { eventsOf, settled } from '../sending/fixtures.ts';
import { applyRetention } from '../../src/retention/apply.ts';
import { newId } from '../../src/platform/ids.ts';

// §18.5: retention never touches unsent mail.
const ctx = await createTestContext({ env: { SINK_SMTP_PORT: '0' } });
const sql = ctx.sql;
const cliEnv = { DATABASE_URL: ctx.url, SECRET_KEY: TEST_SECRET_KEY, LOG_LEVEL: 'silent' };
const DAY_MS = 86_400_000;
const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const suffix = (day: string) => `_p${day.replaceAll('-', '')}`;

function idAt(prefix: string, ms: number) {
  const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  return prefix + encodeTime(ms, 10) + Array.from(randomBytes(16), (b) => alphabet[b % 32]).join('');
}

const tablesOf = async (day: string) => (await sql<{ name: string }[]>`
  select relname as name from pg_class
  where relname in ${sql(['emails', 'events', 'webhook_deliveries', 'email_tags'].map((t) => t + suffix(day)))}`).map((r) => r.name);

test('a scheduled email keeps its body through the purge and goes out whole when it falls due', async () => {
  const t = await ctx.tenant('scheduled ahead');
  const res = await ctx.call(t.key, '/v1/emails', {
    method: 'POST',
    body: {
      from: 'app@acme.test', to: 'later@example.net', subject: 'Scheduled ahead',
      html: '<p>Still here</p>', text: 'Still here', scheduled_at: new Date(Date.now() + 29 * DAY_MS).toISOString(),
      attachments: [{ filename: 'a.txt', content: Buffer.from('attached').toString('base64') }],
    },
  });
  assert.equal(res.status, 201, await res.clone().text());
  const { id } = (await res.json()) as { id: string };
  // Created 31 days ago as far as BODY_RETENTION_DAYS (30 by default) goes, and still waiting.
  await sql`update emails set created_at = now() - interval '31 days' where id = ${id}`;
  const sent = (await ctx.call(t.key, '/v1/emails', { method: 'POST', body: { from: 'app@acme.test', to: 'x@example.net', subject: 'old sent', html: '<p>x</p>' } }));
  const { id: oldSent } = (await sent.json()) as { id: string };
  await sql`update emails set status = 'sent', created_at = now() - interval '31 days' where id = ${oldSent}`;

  const run = await runCli(['retention', 'run'], cliEnv);
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(run.json(), { emails_removed: 0, bodies_purged: 1 }, 'only the sent one');
  const shown = (await (await ctx.call(t.key, `/v1/emails/${id}`)).json()) as Record<string, unknown>;
  assert.equal(shown.status, 'scheduled');
  assert.equal(shown.body_purged, false);
  assert.equal(shown.html, '<p>Still here</p>');

  // It falls due (brought forward), and the worker sends it with its body.
  const patch = await ctx.call(t.key, `/v1/emails/${id}`, { method: 'PATCH', body: { scheduled_at: new Date(Date.now() + 1500).toISOString() } });
  assert.equal(patch.status, 200, await patch.clone().text());
  const worker = await startTestWorker(ctx.config, sql);
  try {
    const state = await settled(sql, t.projectId, id);
    assert.equal(state.status, 'sent', state.lastError ?? '');
  } finally {
    await worker.stop();
  }
  const [caught] = await sql<{ html: string | null; text: string | null; raw: Buffer }[]>`
    select html, text, raw from sink_messages where project_id = ${t.projectId} and email_id = ${id}`;
  assert.ok(caught, 'the sink caught it');
  assert.equal(caught.html, '<p>Still here</p>');
  assert.equal(caught.text?.trim(), 'Still here');
  assert.match(caught.raw.toString(), /filename=a\.txt/);
});

test('the worker never sends an email whose body was purged: it fails it', async () => {
  const t = await ctx.tenant('purged before sending');
  const res = await ctx.call(t.key, '/v1/emails', {
    method: 'POST',
    body: { from: 'app@acme.test', to: 'blank@example.net', subject: 'Purged', html: '<p>x</p>', scheduled_at: new Date(Date.now() + 2000).toISOString() },
  });
  const { id } = (await res.json()) as { id: string };
  // As an older release's purge left it: scheduled, its body gone.
  await sql`update emails set html = null, text = null, attachments = '[]', body_purged = true where id = ${id}`;
  const worker = await startTestWorker(ctx.config, sql);
  try {
    const state = await settled(sql, t.projectId, id);
    assert.equal(state.status, 'failed');
    assert.equal(state.lastError, 'expired before it could be sent');
  } finally {
    await worker.stop();
  }
  assert.equal((await sql`select id from sink_messages where email_id = ${id}`).length, 0, 'nothing went out');
  assert.deepEqual((await eventsOf(sql, t.projectId, id)).map((e) => e.type), ['email.failed']);
});

test('an email unsent RETENTION_DAYS after its creation fails first, with email.failed, and its day goes only once nothing of it is in flight', async () => {
  const t = await ctx.tenant('expired unsent');
  const endpoint = newId('webhook');
  await sql`insert into webhook_endpoints (id, project_id, url, secret_encrypted)
    values (${endpoint}, ${t.projectId}, 'https://hooks.example.test/h', ${Buffer.from('x')})`;
  // A day 100 days back holding a queued email, a scheduled one and a sent one.
  const at = Date.parse(utcDay(Date.now() - 100 * DAY_MS)) + 3_600_000;
  const day = utcDay(at);
  await sql`select mailroom_ensure_partitions(${day}::date, ${day}::date)`;
  const ids: Record<string, string> = {};
  for (const [i, status] of (['queued', 'scheduled', 'sent'] as const).entries()) {
    ids[status] = idAt('email_', at + i);
    await sql`insert into emails (id, project_id, status, from_address, to_addresses, subject, html, text, scheduled_at, created_at)
      values (${ids[status]!}, ${t.projectId}, ${status}, 'a@x.test', ${['b@x.test']}, ${status}, '<p>b</p>', 'b',
        ${status === 'scheduled' ? new Date(at + 30 * DAY_MS) : null}, ${new Date(at)})`;
    await sql`insert into email_recipients (project_id, address, email_id) values (${t.projectId}, 'b@x.test', ${ids[status]!})`;
    await sql`insert into recipient_days (project_id, address, day)
      select project_id, address, mailroom_partition_day(tableoid::regclass::text) from email_recipients where email_id = ${ids[status]!} on conflict do nothing`;
  }
  // And one of today whose creation was set back past RETENTION_DAYS, still queued.
  const res = await ctx.call(t.key, '/v1/emails', { method: 'POST', body: { from: 'app@acme.test', to: 'x@example.net', subject: 'today', text: 't' } });
  const { id: setBack } = (await res.json()) as { id: string };
  await sql`update emails set created_at = now() - interval '91 days' where id = ${setBack}`;

  const first = await applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 30 });
  assert.equal(first.emails_removed, 0, 'the day waits for its email.failed deliveries: ' + JSON.stringify(await sql`select id, status, subject from emails where project_id = ${t.projectId}`));
  assert.equal((await tablesOf(day)).length, 4);
  for (const id of [ids.queued!, ids.scheduled!, setBack]) {
    const [row] = await sql`select status, last_error, body_purged from emails where id = ${id}`;
    assert.deepEqual([row!.status, row!.lastError], ['failed', 'expired before it could be sent'], id);
    const events = await eventsOf(sql, t.projectId, id);
    assert.deepEqual(events.map((e) => [e.type, e.data.reason]), [['email.failed', 'expired before it could be sent']]);
  }
  const [sentRow] = await sql`select status, last_error from emails where id = ${ids.sent!}`;
  assert.deepEqual([sentRow!.status, sentRow!.lastError], ['sent', null]);
  const pending = await sql`select count(*)::int as n from webhook_deliveries where project_id = ${t.projectId} and status = 'pending'`;
  assert.equal(pending[0]!.n, 3, 'each failure is told to the webhook');
  await assertDerivedMatchBaseRows(sql, 'after the failures');

  // Still pending: the day stays.
  assert.equal((await applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 30 })).emails_removed, 0);
  assert.equal((await tablesOf(day)).length, 4);
  await sql`update webhook_deliveries set status = 'delivered' where project_id = ${t.projectId}`;
  const last = await applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 30 });
  assert.equal(last.emails_removed, 4, 'the day (three emails) and the set-back email');
  assert.deepEqual(await tablesOf(day), []);
  await assertDerivedMatchBaseRows(sql, 'after the day went');
});

test('the purge skips unsent emails even in a whole day past BODY_RETENTION_DAYS', async () => {
  const t = await ctx.tenant('whole day purge');
  const at = Date.parse(utcDay(Date.now() - 40 * DAY_MS)) + 3_600_000;
  await sql`select mailroom_ensure_partitions(${utcDay(at)}::date, ${utcDay(at)}::date)`;
  for (const [i, status] of (['queued', 'sending', 'scheduled', 'sent', 'failed', 'canceled'] as const).entries()) {
    await sql`insert into emails (id, project_id, status, from_address, to_addresses, subject, html, text, created_at)
      values (${idAt('email_', at + i)}, ${t.projectId}, ${status}, 'a@x.test', ${['b@x.test']}, ${status}, '<p>b</p>', 'b', ${new Date(at)})`;
  }
  await applyRetention(sql, { retentionDays: 90, bodyRetentionDays: 1 });
  const rows = await sql`select subject, body_purged, html from emails where project_id = ${t.projectId} order by id`;
  assert.deepEqual(rows.map((r) => [r.subject, r.bodyPurged]), [
    ['queued', false], ['sending', false], ['scheduled', false], ['sent', true], ['failed', true], ['canceled', true]]);
});

test('RETENTION_DAYS of 30 or less stops the boot with one line naming it; BODY_RETENTION_DAYS may be 1', async () => {
  for (const role of ['src/worker.ts', 'src/api.ts']) {
    const p = spawnEntry(role, { ...cliEnv, REDIS_URL: 'redis://127.0.0.1:6379', RETENTION_DAYS: '30', BODY_RETENTION_DAYS: '1' });
    const exited = await Promise.race([p.exited, new Promise((r) => setTimeout(() => r('still running after 20 s'), 20_000))]);
    p.child.kill('SIGKILL');
    assert.equal(exited, 1);
    const lines = p.stderr().trim().split('\n');
    assert.equal(lines.length, 1, p.stderr());
    assert.match(lines[0]!, /^mailroom: RETENTION_DAYS: /);
    assert.doesNotMatch(p.stderr(), /\n\s+at /);
  }
  const { loadConfig } = await import('../../src/platform/config.ts');
  const c = loadConfig({ ...cliEnv, REDIS_URL: 'redis://h:6379', RETENTION_DAYS: '31', BODY_RETENTION_DAYS: '1' });
  assert.deepEqual([c.retentionDays, c.bodyRetentionDays], [31, 1]);
});
