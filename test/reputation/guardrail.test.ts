import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startFakeSes } from '../helpers/fake-ses.ts';
import { selfSignedCertificate, startHttpsReceiver } from '../helpers/https-receiver.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { fakeDns, receiverVerifies } from '../webhooks/helpers.ts';
import { ses as sesEvents } from '../events/fixtures.ts';
import { connectProvider, getProviderConnection } from '../../src/providers/connections.ts';
import { createEndpoint } from '../../src/webhooks/service.ts';
import { ingestSesRecord } from '../../src/events/ingest.ts';
import { addSuppressions } from '../../src/suppressions/queries.ts';
import { checkAccounts } from '../../src/reputation/check.task.ts';
import { createLogger } from '../../src/platform/log.ts';
import { runCli } from '../helpers/process.ts';
import { TEST_SECRET_KEY } from '../helpers/app.ts';

// The counting and pausing rules (§19.1–19.6) through the real send task (fake SES at a pace that
// costs no time), SES's events as the poller hands them over (ingestSesRecord, in a transaction
// of its own each), and webhooks to a real HTTPS receiver.
const ses = await startFakeSes();
Object.assign(ses.quota, { maxSendRate: 1000, max24HourSend: 1_000_000 });
const ctx = await createTestContext({
  env: { AWS_ENDPOINT_URL_SESV2: ses.url, WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_RETRY_BASE_MS: '20' },
});
const log = createLogger('silent');
const tls = selfSignedCertificate();
const receiver = await startHttpsReceiver(tls);
const dns = fakeDns({ 'hooks.test': ['127.0.0.1'] });
await startTestWorker(ctx.config, ctx.sql, { webhooks: { ca: tls.cert, resolve: dns.resolve, timeoutMs: 2000 } });

type View = { state: string; reason: string | null; windows: { scope: string; window: string; sent: number; bounced: number; complained: number; bounce_rate: number }[]; aws: Record<string, unknown> | null };
const view = async (key: string) => (await (await ctx.call(key, '/v1/reputation')).json()) as View;
const win = (v: View, scope: string, window: string) => v.windows.find((w) => w.scope === scope && w.window === window)!;

async function sesProject(name: string, accessKeyId: string) {
  const t = await ctx.tenant(name);
  await connectProvider(ctx.sql, ctx.config, { projectId: t.projectId, region: 'eu-west-1', accessKeyId, secretAccessKey: 'secret', sendQuota: { maxSendRate: 1000, max24HourSend: 1_000_000 } });
  return t;
}

/** Sends `n` emails through the API and waits until the worker has settled every one. */
async function sendMany(t: { projectId: string; key: string }, n: number, extra: (i: number) => Record<string, unknown> = () => ({})) {
  for (let start = 0; start < n; start += 100) {
    const batch = Array.from({ length: Math.min(100, n - start) }, (_, k) => ({ from: 'app@shop.example', to: `u${start + k}-${t.projectId}@example.net`, subject: 'Hi', text: 'x', ...extra(start + k) }));
    assert.equal((await ctx.call(t.key, '/v1/emails/batch', { method: 'POST', body: batch })).status, 201);
  }
  await waitFor(`${n} emails settled`, async () => {
    const [row] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from emails where project_id = ${t.projectId} and status in ('queued', 'sending', 'scheduled')`;
    return row.n === 0;
  }, 60_000, 100);
}

/** The project's sent emails' SES message ids, oldest first. */
const messageIds = async (projectId: string) => (await ctx.sql<{ providerMessageId: string; to: string[] }[]>`
  select provider_message_id, to_addresses as to from emails where project_id = ${projectId} and status = 'sent' order by id`);

const ingest = (projectId: string, record: unknown) => ctx.sql.begin((tx) => ingestSesRecord(tx, log, projectId, record));

test('sends count per recipient handed to SES; transient bounces, sink projects and suppressed recipients change nothing', { timeout: 90_000 }, async () => {
  const t = await sesProject('counted', 'AKIDCOUNTED');
  await addSuppressions(ctx.sql, t.projectId, Array.from({ length: 20 }, (_, i) => `u${i}-${t.projectId}@example.net`), 'manual');
  // 250 emails, the first 20 to suppressed recipients; every 10th has a bcc too. Of the first 20,
  // 18 fail unsent and 2 (i = 5, 15) go to their bcc alone.
  await sendMany(t, 250, (i) => (i % 10 === 5 ? { bcc: `copy${i}@example.net` } : {}));
  let v = await view(t.key);
  const expectedSent = 230 + 23 + 2; // 230 emails to their own recipient, 23 of them (i = 25, …, 245) with a bcc, and 2 bcc alone
  assert.equal(win(v, 'project', '1h').sent, expectedSent);
  assert.equal(win(v, 'account', 'representative').sent, expectedSent);
  const [failed] = await ctx.sql`select count(*)::int as n from emails where project_id = ${t.projectId} and last_error = 'recipient_suppressed'`;
  assert.equal(failed!.n, 18);

  // 30 transient bounces and complaints about nothing we count: no bounce counted, nothing paused.
  const sent = await messageIds(t.projectId);
  for (const m of sent.slice(0, 30)) assert.equal(await ingest(t.projectId, sesEvents.bounce(m.providerMessageId, 'Transient', m.to, 'MailboxFull')), 'recorded');
  v = await view(t.key);
  assert.equal(win(v, 'project', '1h').bounced, 0);
  assert.equal(v.state, 'ok');

  // A sink project: 300 emails through the sink and 30 "bounces" of them count for nothing.
  const sink = await ctx.tenant('sink');
  await sendMany(sink, 300);
  const sinkSent = await messageIds(sink.projectId);
  assert.equal(sinkSent.length, 300);
  for (const m of sinkSent.slice(0, 30)) await ingest(sink.projectId, sesEvents.bounce(m.providerMessageId, 'Permanent', m.to));
  const sv = await view(sink.key);
  assert.deepEqual(sv.windows.map((w) => [w.sent, w.bounced]), [[0, 0], [0, 0]]);
  assert.equal(sv.state, 'ok');
  const [sinkCounters] = await ctx.sql`select count(*)::int as n from reputation_counts where project_id = ${sink.projectId}`;
  assert.equal(sinkCounters!.n, 0);

  // Now hard bounces do count, per recipient: 4 of them (under 5 events, the hour cannot act yet).
  for (const m of sent.slice(30, 34)) await ingest(t.projectId, sesEvents.bounce(m.providerMessageId, 'Permanent', m.to));
  v = await view(t.key);
  assert.equal(win(v, 'project', '1h').bounced, 4);
  assert.equal(win(v, 'project', '1h').bounce_rate, 4 / expectedSent);
});

test('a crossing pauses at once, warns first, tells endpoints that filter for it (signed, email_id null), and the CLI resumes', { timeout: 90_000 }, async () => {
  const t = await sesProject('crossing', 'AKIDCROSSING');
  const wanted = await createEndpoint(ctx.sql, ctx.config, t.projectId, receiver.url('/rep-wanted', 'hooks.test'),
    { resolve: dns.resolve, eventTypes: ['project.reputation_warning', 'project.sending_paused', 'project.sending_resumed'] });
  const bouncesOnly = await createEndpoint(ctx.sql, ctx.config, t.projectId, receiver.url('/rep-bounces', 'hooks.test'),
    { resolve: dns.resolve, eventTypes: ['email.bounced'] });
  await sendMany(t, 250);
  const sent = await messageIds(t.projectId);
  // 5 bounces of 250 is 2%: the warning (the hour acts from 5 events).
  for (const m of sent.slice(0, 5)) await ingest(t.projectId, sesEvents.bounce(m.providerMessageId, 'Permanent', m.to));
  assert.equal((await view(t.key)).state, 'warning');
  // 10 of 250 is 4%: the 10th bounce's own transaction pauses the project.
  for (const m of sent.slice(5, 9)) await ingest(t.projectId, sesEvents.bounce(m.providerMessageId, 'Permanent', m.to));
  assert.equal((await view(t.key)).state, 'warning');
  await ingest(t.projectId, sesEvents.bounce(sent[9]!.providerMessageId, 'Permanent', sent[9]!.to));
  const paused = await view(t.key);
  assert.equal(paused.state, 'paused');
  assert.equal(paused.reason, 'bounce_rate');

  const requests = () => receiver.requests.filter((r) => r.path === '/rep-wanted');
  await waitFor('two project webhooks', () => requests().length >= 2, 60_000);
  const bodies = requests().map((r) => JSON.parse(r.body.toString('utf8')) as { type: string; email_id: unknown; data: Record<string, unknown> });
  assert.deepEqual(bodies.map((b) => b.type), ['project.reputation_warning', 'project.sending_paused']);
  for (const [i, b] of bodies.entries()) {
    assert.equal(b.email_id, null);
    assert.ok(receiverVerifies(wanted.secret, requests()[i]!.headers, requests()[i]!.body), 'signed like every other webhook');
  }
  assert.deepEqual(bodies[1]!.data, {
    project_id: t.projectId, scope: 'project', window: '1h', kind: 'bounce', rate: 10 / 250, threshold: 0.04, sent: 250, events: 10, reason: 'bounce_rate',
  });
  // The bounces-only endpoint gets the bounces and none of the project's events.
  await waitFor('bounce webhooks', () => receiver.requests.filter((r) => r.path === '/rep-bounces').length >= 10, 60_000);
  await new Promise((r) => setTimeout(r, 300));
  assert.ok(receiver.requests.filter((r) => r.path === '/rep-bounces').every((r) => JSON.parse(r.body.toString()).type === 'email.bounced'));
  void bouncesOnly;

  // Held while paused; the CLI resumes, and the held email leaves.
  const held = await ctx.call(t.key, '/v1/emails', { method: 'POST', body: { from: 'app@shop.example', to: 'held@example.net', subject: 'Held', text: 'x' } });
  assert.equal(held.status, 201);
  const { id } = (await held.json()) as { id: string };
  // A scheduled email that falls due while paused waits too, as queued.
  const scheduled = await ctx.call(t.key, '/v1/emails', { method: 'POST', body: { from: 'app@shop.example', to: 'later@example.net', subject: 'Later', text: 'x', scheduled_at: new Date(Date.now() + 1500).toISOString() } });
  assert.equal(scheduled.status, 201);
  const { id: scheduledId } = (await scheduled.json()) as { id: string };
  const status = async (emailId: string) => ((await (await ctx.call(t.key, `/v1/emails/${emailId}`)).json()) as { status: string }).status;
  await waitFor('the scheduled email to fall due and be held', async () => (await status(scheduledId)) === 'queued', 60_000);
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(await status(id), 'queued');
  assert.equal(await status(scheduledId), 'queued');
  const cli = await runCli(['reputation', 'resume', '--project', t.projectId], { DATABASE_URL: ctx.url, SECRET_KEY: TEST_SECRET_KEY, LOG_LEVEL: 'silent' });
  assert.equal(cli.code, 0, cli.stderr);
  assert.deepEqual(JSON.parse(cli.stdout), { project: t.projectId, resumed: true, released: 2 });
  await waitFor('the held emails sent', async () => (await status(id)) === 'sent' && (await status(scheduledId)) === 'sent', 60_000);
  await waitFor('the resumed webhook', () => requests().some((r) => JSON.parse(r.body.toString()).type === 'project.sending_resumed'), 60_000);
  const audit = await ctx.sql`select actor_type, action, changes from audit_log where project_id = ${t.projectId} and action like 'reputation.%' order by id`;
  assert.deepEqual(audit.map((r) => [r.actorType, r.action, r.changes]), [
    ['system', 'reputation.paused', { paused: true, reason: 'bounce_rate' }],
    ['cli', 'reputation.resumed', { paused: false }],
  ]);

  // Both windows start afresh: bounces of mail sent before the resume never pause it again.
  for (const m of sent.slice(10, 40)) await ingest(t.projectId, sesEvents.bounce(m.providerMessageId, 'Permanent', m.to));
  const after = await view(t.key);
  assert.equal(after.state, 'ok');
  assert.deepEqual(after.windows.map((w) => w.bounced), [0, 0, 0, 0]);
  assert.deepEqual(after.windows.map((w) => w.sent), [2, 2, 2, 2]);
});

test('two projects on one access key: one project\'s bounces pause both through the account scope; a resume starts the account afresh too', { timeout: 90_000 }, async () => {
  const a = await sesProject('noisy', 'AKIDSHARED');
  const b = await sesProject('quiet', 'AKIDSHARED');
  await sendMany(a, 200);
  await sendMany(b, 300);
  const sent = await messageIds(a.projectId);
  // 21 bounces of a's 200 is 10.5% for a, and 4.2% of the account's 500: both cross their pause.
  for (const m of sent.slice(0, 21)) await ingest(a.projectId, sesEvents.bounce(m.providerMessageId, 'Permanent', m.to));
  const av = await view(a.key);
  const bv = await view(b.key);
  assert.equal(av.state, 'paused');
  assert.equal(bv.state, 'paused', 'the quiet project is paused through the account');
  assert.equal(bv.reason, 'bounce_rate');
  assert.equal(win(bv, 'project', '1h').bounced, 0);
  assert.equal(win(bv, 'account', '1h').bounced, 21);
  assert.equal(win(bv, 'account', '1h').sent, 500);
  const [event] = await ctx.sql`select data from events where project_id = ${b.projectId} and type = 'project.sending_paused'`;
  assert.equal(event!.data.scope, 'account');

  // b resumes; a's further bounces (of mail sent before b's resume) never pause b again.
  assert.equal((await ctx.call(b.key, '/v1/reputation/resume', { method: 'POST' })).status, 200);
  for (const m of sent.slice(21, 40)) await ingest(a.projectId, sesEvents.bounce(m.providerMessageId, 'Permanent', m.to));
  const after = await view(b.key);
  assert.equal(after.state, 'ok');
  assert.equal(win(after, 'account', '1h').sent, 0);
  assert.equal((await view(a.key)).state, 'paused');

  // The counters are derived numbers (§17.3): `stats rebuild` makes them again from the events.
  const before = [await view(a.key), await view(b.key)].map((v) => v.windows);
  await ctx.sql`delete from reputation_counts where project_id in ${ctx.sql([a.projectId, b.projectId])}`;
  assert.notDeepEqual([await view(a.key), await view(b.key)].map((v) => v.windows), before);
  const rebuilt = await runCli(['stats', 'rebuild'], { DATABASE_URL: ctx.url, SECRET_KEY: TEST_SECRET_KEY, LOG_LEVEL: 'silent' });
  assert.equal(rebuilt.code, 0, rebuilt.stderr);
  assert.deepEqual([await view(a.key), await view(b.key)].map((v) => v.windows), before);
});

test('GetAccount: the standing is shown, a change fires account.enforcement_changed, and sending disabled pauses the account\'s projects', { timeout: 60_000 }, async () => {
  const a = await sesProject('aws-a', 'AKIDAWS');
  const b = await sesProject('aws-b', 'AKIDAWS');
  const deps = { config: ctx.config, sql: ctx.sql, log };
  ses.account.enforcementStatus = 'HEALTHY';
  await checkAccounts(deps, { all: true });
  const first = await view(a.key);
  assert.equal(first.aws!.enforcement_status, 'HEALTHY');
  assert.equal(first.aws!.sending_enabled, true);
  assert.ok(Date.parse(String(first.aws!.checked_at)));
  ses.account.enforcementStatus = 'PROBATION';
  await checkAccounts(deps, { all: true });
  for (const t of [a, b]) {
    const rows = await ctx.sql`select data from events where project_id = ${t.projectId} and type = 'account.enforcement_changed'`;
    assert.deepEqual(rows.map((r) => r.data), [{ project_id: t.projectId, region: 'eu-west-1', from: 'HEALTHY', to: 'PROBATION' }]);
  }
  // Not read again before 4 minutes have passed (the cron runs every minute).
  ses.account.sendingEnabled = false;
  await checkAccounts(deps);
  assert.equal((await view(a.key)).state, 'ok');
  await ctx.sql`update ses_accounts set account_checked_at = now() - interval '5 minutes'
    where id = (select ses_account_id from provider_connections where project_id = ${a.projectId})`;
  await checkAccounts(deps);
  for (const t of [a, b]) {
    const v = await view(t.key);
    assert.equal(v.state, 'paused');
    assert.equal(v.reason, 'aws_sending_disabled');
    assert.equal(v.aws!.sending_enabled, false);
  }
  ses.account.sendingEnabled = true;
  ses.account.enforcementStatus = 'HEALTHY';
  void getProviderConnection;
});
