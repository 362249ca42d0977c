import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startFakeSes } from '../helpers/fake-ses.ts';
import { waitFor } from '../helpers/wait.ts';
import { ses as sesEvents } from '../events/fixtures.ts';
import { insertEmail, noHelpers } from '../sending/fixtures.ts';
import { connectProvider } from '../../src/providers/connections.ts';
import { ingestSesRecord } from '../../src/events/ingest.ts';
import { emailSendTask } from '../../src/emails/send.task.ts';
import { pauseProjects } from '../../src/reputation/queries.ts';
import { rebuildStats } from '../../src/stats/rebuild.ts';
import { accountReadTask, REPUTATION_CHECK_CRON, reputationCheckTask } from '../../src/reputation/check.task.ts';
import { createLogger } from '../../src/platform/log.ts';

// Reputation counts are one truth (§22.9): the account's windows every project reads, a resume
// that re-arms only its own project, `stats rebuild` finding what the live path wrote, and two
// projects crossing at once both pausing.
const ses = await startFakeSes();
Object.assign(ses.quota, { maxSendRate: 1000, max24HourSend: 1_000_000 });
const ctx = await createTestContext({ env: { AWS_ENDPOINT_URL_SESV2: ses.url } });
const log = createLogger('silent');
const task = emailSendTask({ config: ctx.config, sql: ctx.sql, log });

type Window = { scope: string; window: string; sent: number; bounced: number; complained: number };
type View = { state: string; windows: Window[] };
const view = async (key: string) => (await (await ctx.call(key, '/v1/reputation')).json()) as View;
const win = (v: View, scope: string, window: string) => v.windows.find((w) => w.scope === scope && w.window === window)!;

async function sesProject(name: string, accessKeyId: string) {
  const t = await ctx.tenant(name);
  await connectProvider(ctx.sql, ctx.config, { projectId: t.projectId, region: 'eu-west-1', accessKeyId, secretAccessKey: 'secret', sendQuota: { maxSendRate: 1000, max24HourSend: 1_000_000 } });
  return t;
}

/** Sends `n` emails through the send task and answers them, sent, oldest first. */
async function sendMany(projectId: string, n: number) {
  for (let i = 0; i < n; i++) {
    const id = await insertEmail(ctx.sql, projectId, { to: [`u${i}-${projectId}@example.net`] }, false);
    // On a busy machine the send slot may be too far ahead and the email go back to the queue: again.
    await waitFor(`email ${i} sent`, async () => {
      await task({ email_id: id, project_id: projectId }, noHelpers);
      const [row] = await ctx.sql<[{ status: string }]>`select status from emails where id = ${id} and project_id = ${projectId}`;
      return row.status === 'sent';
    }, 30_000, 50);
  }
  const rows = await ctx.sql<{ providerMessageId: string; to: string[] }[]>`
    select provider_message_id, to_addresses as to from emails where project_id = ${projectId} and status = 'sent' order by id`;
  assert.equal(rows.length, n);
  return rows;
}

const ingest = (projectId: string, record: unknown) => ctx.sql.begin((tx) => ingestSesRecord(tx, log, projectId, record));
const hardBounce = (projectId: string, m: { providerMessageId: string; to: string[] }) =>
  ingest(projectId, sesEvents.bounce(m.providerMessageId, 'Permanent', m.to));

test('late hard bounces of a resumed project count in the account windows its peers read, never in its own; stats rebuild finds the same', { timeout: 120_000 }, async () => {
  const a = await sesProject('resumed', 'AKIDONETRUTH');
  const b = await sesProject('peer', 'AKIDONETRUTH');
  const aSent = await sendMany(a.projectId, 10);
  await sendMany(b.projectId, 5);

  // Five hard bounces before the pause, in the hour the resume will fall in.
  for (const m of aSent.slice(0, 5)) assert.equal(await hardBounce(a.projectId, m), 'recorded');
  assert.equal(win(await view(b.key), 'account', '1h').bounced, 5);
  await ctx.sql.begin((tx) => pauseProjects(tx, [a.projectId], 'bounce_rate'));
  assert.equal((await ctx.call(a.key, '/v1/reputation/resume', { method: 'POST' })).status, 200);

  // Five more, for mail a sent before its resume.
  for (const m of aSent.slice(5, 10)) assert.equal(await hardBounce(a.projectId, m), 'recorded');
  const av = await view(a.key);
  const bv = await view(b.key);
  assert.equal(av.state, 'ok');
  assert.deepEqual(av.windows.map((w) => w.bounced), [0, 0, 0, 0], 'the resume started a\'s own windows afresh, its account scope included');
  assert.equal(win(bv, 'project', '1h').bounced, 0);
  assert.equal(win(bv, 'account', '1h').bounced, 10, 'every hard bounce on the account counts for the peer, whatever a did');
  assert.equal(win(bv, 'account', 'representative').bounced, 10);
  assert.equal(win(bv, 'account', '1h').sent, 15);

  // stats rebuild recomputes exactly what the live path wrote: the same readings, none negative.
  const before = [av, bv].map((v) => v.windows);
  await rebuildStats(ctx.sql);
  const rebuilt = [await view(a.key), await view(b.key)].map((v) => v.windows);
  assert.deepEqual(rebuilt, before);
  // And from the events alone: the counters gone, a rebuild makes them again.
  await ctx.sql`delete from reputation_counts where project_id in ${ctx.sql([a.projectId, b.projectId])}`;
  await rebuildStats(ctx.sql);
  const fromEvents = [await view(a.key), await view(b.key)].map((v) => v.windows);
  assert.deepEqual(fromEvents, before);
  for (const w of fromEvents.flat()) assert.ok(w.sent >= 0 && w.bounced >= 0 && w.complained >= 0, JSON.stringify(w));
  const [negative] = await ctx.sql`select count(*)::int as n from reputation_counts where n < 0`;
  assert.equal(negative!.n, 0);
});

test('two projects of one account crossing its pause threshold at the same moment both pause, with no deadlock', { timeout: 120_000 }, async () => {
  const a = await sesProject('cross-a', 'AKIDCROSSTOGETHER');
  const b = await sesProject('cross-b', 'AKIDCROSSTOGETHER');
  const c = await sesProject('cross-c', 'AKIDCROSSTOGETHER');
  const [aMail] = await sendMany(a.projectId, 1);
  const [bMail] = await sendMany(b.projectId, 1);
  // The account one bounce from its pause (39 of 1,000) through c, which is paused; a and b
  // themselves are far under theirs: each one's bounce takes the account to 4%.
  const [conn] = await ctx.sql<[{ accountId: string }]>`select ses_account_id::text as account_id from provider_connections where project_id = ${c.projectId}`;
  await ctx.sql`
    insert into reputation_counts (project_id, account_id, hour, metric, shard, n) values
      (${a.projectId}, ${conn.accountId}, date_trunc('hour', now()), 'sent', 0, 299),
      (${b.projectId}, ${conn.accountId}, date_trunc('hour', now()), 'sent', 0, 299),
      (${c.projectId}, ${conn.accountId}, date_trunc('hour', now()), 'sent', 0, 400),
      (${c.projectId}, ${conn.accountId}, date_trunc('hour', now()), 'bounced', 0, 39)`;
  await ctx.sql.begin((tx) => pauseProjects(tx, [c.projectId], 'bounce_rate'));
  await ctx.sql`insert into project_reputation (project_id) values (${a.projectId}), (${b.projectId})`;

  // Both transactions reach their pauses while a third holds both rows, so they race for them at once.
  const holder = await ctx.sql.reserve();
  try {
    await holder`begin`;
    await holder`select 1 from project_reputation where project_id in ${holder([a.projectId, b.projectId])} for update`;
    const started = Date.now();
    const both = Promise.allSettled([hardBounce(a.projectId, aMail!), hardBounce(b.projectId, bMail!)]);
    await waitFor('both waiting on the rows', async () => {
      const [row] = await ctx.sql<[{ n: number }]>`
        select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`;
      return row.n >= 2;
    }, 30_000, 20);
    await holder`commit`;
    const outcomes = await both;
    for (const o of outcomes) assert.equal(o.status === 'fulfilled' ? o.value : String((o as PromiseRejectedResult).reason), 'recorded');
    const [av, bv] = [await view(a.key), await view(b.key)];
    assert.equal(av.state, 'paused');
    assert.equal(bv.state, 'paused');
    assert.ok(Date.now() - started < 60_000);
  } finally {
    holder.release();
  }
});

test('an email another attempt holds while its project is paused keeps a job to look again when that lease ends', { timeout: 60_000 }, async () => {
  const t = await ctx.tenant('held-elsewhere');
  const id = await insertEmail(ctx.sql, t.projectId, {}, false);
  await ctx.sql`update emails set status = 'sending', attempt_count = 1, lease_owner = 'elsewhere/0123456789ab', lease_expires_at = now() + interval '60 seconds'
    where id = ${id} and project_id = ${t.projectId}`;
  await ctx.sql.begin((tx) => pauseProjects(tx, [t.projectId], 'bounce_rate'));
  await task({ email_id: id, project_id: t.projectId }, noHelpers);
  const jobs = await ctx.sql`select run_at from graphile_worker.jobs where task_identifier = 'email__send' and key = ${id}`;
  assert.equal(jobs.length, 1, 'not stranded in sending with no job: the resume releases only queued mail');
  // A held (queued) email of the paused project needs none: the resume gives it one.
  const queued = await insertEmail(ctx.sql, t.projectId, {}, false);
  await task({ email_id: queued, project_id: t.projectId }, noHelpers);
  const none = await ctx.sql`select 1 from graphile_worker.jobs where key = ${queued}`;
  assert.equal(none.length, 0);
});

test('the minute\'s check reads each due account in a job of its own, keyed by the account, and never runs two sweeps at once', { timeout: 60_000 }, async () => {
  assert.equal(REPUTATION_CHECK_CRON.options?.queueName, 'reputation__check', 'sweeps run one at a time');
  assert.equal(REPUTATION_CHECK_CRON.options?.jobKey, 'reputation__check');
  await ctx.sql`update ses_accounts set account_checked_at = now()`;
  const x = await sesProject('read-x', 'AKIDREADX');
  const y = await sesProject('read-y', 'AKIDREADY');
  await sesProject('read-y2', 'AKIDREADY');
  const accounts = await ctx.sql<{ id: string }[]>`
    select distinct ses_account_id::text as id from provider_connections where project_id in ${ctx.sql([x.projectId, y.projectId])} order by 1`;
  const deps = { config: ctx.config, sql: ctx.sql, log };
  const check = reputationCheckTask(deps);
  await check({}, noHelpers);
  await check({}, noHelpers);
  const jobs = await ctx.sql<{ key: string }[]>`
    select key from graphile_worker.jobs where task_identifier = 'reputation__read_account' order by key`;
  assert.deepEqual(jobs.map((j) => j.key), accounts.map((a) => `reputation__read_account:${a.id}`), 'one job per due account, however many ticks');
  ses.account.enforcementStatus = 'HEALTHY';
  await accountReadTask(deps)({ ses_account_id: accounts[0]!.id }, noHelpers);
  const [read] = await ctx.sql`select enforcement_status, account_checked_at from ses_accounts where id = ${accounts[0]!.id}`;
  assert.equal(read!.enforcementStatus, 'HEALTHY');
  assert.ok(read!.accountCheckedAt);
});
