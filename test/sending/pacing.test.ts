import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext, TEST_SECRET_KEY } from '../helpers/app.ts';
import { startFakeSes } from '../helpers/fake-ses.ts';
import { testRedisUrl, REDIS_SKIP_REASON } from '../helpers/redis.ts';
import { scheduleAhead } from '../helpers/scheduling.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { freePort, startWorkerProcess, stopProcess } from '../helpers/worker-process.ts';
import { connectProvider, getProviderConnection } from '../../src/providers/connections.ts';
import { claimEmail } from '../../src/emails/queries.ts';
import { emailSendTask } from '../../src/emails/send.task.ts';
import { reserveSendSlot } from '../../src/providers/pacing.ts';
import { sesClientFor } from '../../src/providers/ses-client.ts';
import { createLogger } from '../../src/platform/log.ts';
import { createSql } from '../../src/platform/db.ts';
import { emailState, insertEmail, noHelpers } from './fixtures.ts';

const redisUrl = await testRedisUrl();
const ses = await startFakeSes();
const ctx = await createTestContext({ env: { AWS_ENDPOINT_URL_SESV2: ses.url, EMAIL_RETRY_BASE_MS: '50' } });

async function sesProject(name: string, quota: { maxSendRate: number; max24HourSend: number }, accessKeyId = `AKID${name}`) {
  const { projectId } = await ctx.tenant(name);
  await connectProvider(ctx.sql, ctx.config, { projectId, region: 'eu-west-1', accessKeyId, secretAccessKey: 'secret', sendQuota: quota });
  return projectId;
}

const statuses = async (projectId: string) => {
  const rows = await ctx.sql<{ status: string; n: number; attempts: number }[]>`
    select status, count(*)::int as n, max(attempt_count)::int as attempts from emails where project_id = ${projectId} group by status`;
  return Object.fromEntries(rows.map((r) => [r.status, r])) as Record<string, { n: number; attempts: number }>;
};

function resetSes(maxSendRate: number, max24HourSend = 1_000_000) {
  ses.reset();
  Object.assign(ses.quota, { maxSendRate, max24HourSend });
}

/** Send slots at 2/s, as `reserveSendSlot` spaces them. */
const SPACING_AT_2_PER_S = 1000 / (0.85 * 2);

async function nextSlot(projectId: string) {
  const [row] = await ctx.sql<[{ nextSendSlot: Date }]>`
    select a.next_send_slot from ses_accounts a join provider_connections pc on pc.ses_account_id = a.id where pc.project_id = ${projectId}`;
  return row.nextSendSlot.getTime();
}

/**
 * Holds each request through the project's SES client before signing, for `holdMs(n)` ms (n counts
 * from 0), as a cold SDK or a busy event loop would. Answers how many requests went through.
 */
async function holdRequests(projectId: string, holdMs: (n: number) => number) {
  const client = sesClientFor(ctx.config, (await getProviderConnection(ctx.sql, ctx.config, projectId))!);
  let seen = 0;
  client.middlewareStack.add((next) => async (args) => {
    const ms = holdMs(seen++);
    if (ms > 0) await new Promise((r) => setTimeout(r, ms));
    return next(args);
  }, { step: 'initialize', name: 'testHoldRequests' });
  return () => seen;
}

test('two worker processes together stay at the account rate: no second over it, no throttle', { skip: redisUrl ? false : REDIS_SKIP_REASON, timeout: 60_000 }, async () => {
  // The account SES reports is the stored one, so the workers' quota refresh (every ten minutes
  // by the clock, which a run can cross) keeps the rate; SES throttles any send over it.
  resetSes(5);
  const projectId = await sesProject('paced', { maxSendRate: 5, max24HourSend: 50_000 });
  const total = 30;
  for (let i = 0; i < total; i++) await insertEmail(ctx.sql, projectId, { subject: `Paced ${i}` });
  const env = {
    DATABASE_URL: ctx.url, SECRET_KEY: TEST_SECRET_KEY, REDIS_URL: redisUrl!, LOG_LEVEL: 'silent',
    SINK_SMTP_HOST: '127.0.0.1', WORKER_CONCURRENCY: '8', AWS_ENDPOINT_URL_SESV2: ses.url,
  };
  const started = Date.now();
  const workers = [
    startWorkerProcess({ ...env, SINK_SMTP_PORT: String(await freePort()) }),
    startWorkerProcess({ ...env, SINK_SMTP_PORT: String(await freePort()) }),
  ];
  await waitFor('every paced email to be sent', async () => (await statuses(projectId)).sent?.n === total, 40_000, 100);
  const seconds = (Date.now() - started) / 1000;
  await Promise.all(workers.map((w) => stopProcess(w)));
  const times = [...ses.accepted].sort((a, b) => a - b);
  const gaps = times.slice(1).map((t, i) => t - times[i]!);
  assert.ok(ses.peakPerSecond() <= 5, `at most 5 sends in any second, saw ${ses.peakPerSecond()}; ms between sends: ${gaps.join(' ')}`);
  assert.equal(ses.stats.throttled, 0, 'SES throttled nothing');
  assert.equal((await statuses(projectId)).sent!.attempts, 1);
  assert.ok(seconds >= (total - 5) / 5, `30 sends at 5/s take at least 5 s, took ${seconds}`);
});

test('a send woken too late for its slot leaves it unused and takes the next free one', async () => {
  resetSes(1000);
  const projectId = await sesProject('late', { maxSendRate: 2, max24HourSend: 50_000 });
  const task = emailSendTask({ config: ctx.config, sql: ctx.sql, log: createLogger('silent') });
  const id = await insertEmail(ctx.sql, projectId, {}, false);
  await reserveSendSlot(ctx.sql, projectId); // the email's slot is then one spacing ahead
  const before = await nextSlot(projectId);
  const run = task({ email_id: id, project_id: projectId }, noHelpers);
  await waitFor('the task to take its slot', async () => (await nextSlot(projectId)) > before, 5000, 5);
  // The event loop is held past the slot, as a busy worker's would be.
  const until = Date.now() + SPACING_AT_2_PER_S + 300;
  while (Date.now() < until) { /* busy */ }
  await run;
  assert.ok((await nextSlot(projectId)) - before >= 2 * SPACING_AT_2_PER_S - 5, 'the late slot was left unused and another taken');
  assert.equal(ses.accepted.length, 1);
  assert.deepEqual(await emailState(ctx.sql, projectId, id).then((s) => [s.status, s.attemptCount]), ['sent', 1]);
});

test('a request held up inside the SDK past its slot is not sent in it, and goes in the next one', async () => {
  resetSes(1000);
  const projectId = await sesProject('held', { maxSendRate: 2, max24HourSend: 50_000 });
  // The first request is held longer than a slot's tolerance, as a cold SDK's first request is
  // (loading its code, resolving the endpoint).
  const requests = await holdRequests(projectId, (n) => (n === 0 ? 200 : 0));
  const task = emailSendTask({ config: ctx.config, sql: ctx.sql, log: createLogger('silent') });
  const id = await insertEmail(ctx.sql, projectId, {}, false);
  await reserveSendSlot(ctx.sql, projectId); // the email's slot is then one spacing ahead
  const before = await nextSlot(projectId);
  await task({ email_id: id, project_id: projectId }, noHelpers);
  // Twice as a rule. A third time is right too when the machine stalls the second request past
  // its own slot's 50 ms, as a loaded test run can: each try takes a slot of its own.
  const tries = requests();
  assert.ok(tries === 2 || tries === 3, `the request went through the SDK twice, or three times on a stalled machine (${tries})`);
  assert.ok((await nextSlot(projectId)) - before >= tries * SPACING_AT_2_PER_S - 5, 'a slot was taken for each try');
  assert.equal(ses.requests.filter((r) => r.raw.includes(id)).length, 1, 'SES got the email once');
  assert.deepEqual(await emailState(ctx.sql, projectId, id).then((s) => [s.status, s.attemptCount]), ['sent', 1]);
});

test('an email none of whose slots it could make goes back to the queue unsent, with no attempt used', async () => {
  resetSes(1000);
  const projectId = await sesProject('stalled', { maxSendRate: 2, max24HourSend: 50_000 });
  // Every request is held longer than a slot's tolerance, as in a worker whose event loop never
  // frees up in time.
  const requests = await holdRequests(projectId, () => 150);
  const task = emailSendTask({ config: ctx.config, sql: ctx.sql, log: createLogger('silent') });
  const id = await insertEmail(ctx.sql, projectId, {}, false);
  await task({ email_id: id, project_id: projectId }, noHelpers);
  assert.equal(requests(), 3, 'three slots were tried');
  assert.equal(ses.requests.filter((r) => r.raw.includes(id)).length, 0, 'nothing reached SES');
  assert.deepEqual(await emailState(ctx.sql, projectId, id).then((s) => [s.status, s.attemptCount]), ['queued', 0]);
  const [job] = await ctx.sql<[{ runAt: Date }]>`select run_at from graphile_worker.jobs where key = ${id}`;
  assert.ok(job && job.runAt.getTime() > Date.now(), 'its job runs again later');
});

test('a slot whose answer comes back late is not sent in: its deadline counts from the asking', async () => {
  resetSes(1000);
  const projectId = await sesProject('slow-answer', { maxSendRate: 2, max24HourSend: 50_000 });
  // The reservation's answer takes 150 ms to come back (a busy database or worker); the slot was
  // counted from PostgreSQL's clock at its start, so a request sent on the answer would leave
  // 150 ms after its slot.
  const [{ accountId }] = await ctx.sql<[{ accountId: string }]>`select ses_account_id::text as account_id from provider_connections where project_id = ${projectId}`;
  await ctx.sql.unsafe(`
    create function slow_slot_answer() returns trigger language plpgsql as $$
      begin perform pg_sleep(0.15); return new; end $$;
    create trigger slow_slot_answer before update on ses_accounts for each row
      when (new.id = ${Number(accountId)}) execute function slow_slot_answer()`);
  try {
    const task = emailSendTask({ config: ctx.config, sql: ctx.sql, log: createLogger('silent') });
    const id = await insertEmail(ctx.sql, projectId, {}, false);
    await task({ email_id: id, project_id: projectId }, noHelpers);
    assert.equal(ses.requests.filter((r) => r.raw.includes(id)).length, 0, 'nothing left late for its slot');
    assert.deepEqual(await emailState(ctx.sql, projectId, id).then((s) => [s.status, s.attemptCount]), ['queued', 0]);
  } finally {
    await ctx.sql.unsafe('drop trigger slow_slot_answer on ses_accounts; drop function slow_slot_answer()');
  }
});

test('throttling fails nothing and costs no attempt; the quota is read again at once and followed, so throttles stay at most 2 plus the rate', { timeout: 60_000 }, async () => {
  resetSes(4);
  // The connection believes in 40/s, read at connect, while SES now allows 4: SES throttles, and
  // Mailroom reads the account again and follows it, whatever the backlog.
  const projectId = await sesProject('throttled', { maxSendRate: 40, max24HourSend: 50_000 });
  const total = 24;
  for (let i = 0; i < total; i++) await insertEmail(ctx.sql, projectId, { subject: `Throttled ${i}` });
  const worker = await startTestWorker(ctx.config, ctx.sql);
  // Worker and SES both run here: ahead of the other test files, as on hosts of their own.
  const putBack = scheduleAhead([0]);
  try {
    await waitFor('every throttled email to be sent', async () => (await statuses(projectId)).sent?.n === total, 50_000, 100);
  } finally {
    putBack();
    await worker.stop();
  }
  const byStatus = await statuses(projectId);
  assert.deepEqual(Object.keys(byStatus), ['sent']);
  assert.equal(byStatus.sent!.attempts, 1, 'a throttle is not an attempt');
  assert.ok(ses.stats.throttled > 0, 'SES did throttle');
  assert.ok(ses.stats.throttled <= 2 + 4, `throttles at most 2 plus the rate, saw ${ses.stats.throttled}`);
  const [view] = await ctx.sql<[{ throttlesLastHour: number; slowed: boolean; sendRate: number; accountMaxSendRate: number }]>`
    select throttles_last_hour::int, slowed, send_rate, account_max_send_rate from ops.providers where project_id = ${projectId}`;
  assert.ok(view.throttlesLastHour > 0);
  assert.equal(view.slowed, true);
  assert.equal(view.accountMaxSendRate, 4, 'the rate SES reports now');
  assert.equal(view.sendRate, 2, 'half of 4 while slowed');
});

test('a rate dropped after connect, with four worker processes and a backlog: every process drops its slots at the first throttle and waits for the GetAccount re-read, so throttles stay at most 2 plus the rate', { skip: redisUrl ? false : REDIS_SKIP_REASON, timeout: 120_000 }, async () => {
  // Connected at 40/s, and SES now allows 1 (an account back at the sandbox's rate). Every process
  // holds or takes slots spaced for 40/s when the first throttle comes back: each must give them
  // up then, not at a throttle of its own, and none may take a new slot before the account's
  // quota has been read again, however long GetAccount takes.
  const processes = 4;
  const rate = 1;
  resetSes(40);
  const projectId = await sesProject('throttled-four', { maxSendRate: 40, max24HourSend: 50_000 });
  const warm = 16;
  const backlog = 8;
  const env = {
    DATABASE_URL: ctx.url, SECRET_KEY: TEST_SECRET_KEY, REDIS_URL: redisUrl!, LOG_LEVEL: 'silent',
    SINK_SMTP_HOST: '127.0.0.1', WORKER_CONCURRENCY: '2', AWS_ENDPOINT_URL_SESV2: ses.url, EMAIL_RETRY_BASE_MS: '50',
  };
  const workers = [];
  for (let i = 0; i < processes; i++) workers.push(startWorkerProcess({ ...env, SINK_SMTP_PORT: String(await freePort()) }));
  // The bound is a race between the paced sends and the first throttle's answer reaching every
  // process. The workers and SES (served here) run on hosts of their own in production; here they
  // are scheduled ahead of the other test files, so a starved CPU does not stand in for the code.
  const putBack = scheduleAhead([0, ...workers.map((w) => w.pid!)]);
  try {
    // Every process warm, sending at 40/s; then SES allows 1 and a backlog arrives at once.
    for (let i = 0; i < warm; i++) await insertEmail(ctx.sql, projectId, { subject: `Warm ${i}` });
    await waitFor('the warm-up to be sent', async () => (await statuses(projectId)).sent?.n === warm, 60_000, 50);
    ses.reset();
    ses.quota.maxSendRate = rate;
    // GetAccount answers a second late, as on a busy machine: the re-read takes that long.
    ses.hooks.beforeAccount = () => new Promise((r) => setTimeout(r, 1000));
    const ids: string[] = [];
    for (let i = 0; i < backlog; i++) ids.push(await insertEmail(ctx.sql, projectId, { subject: `Throttled ${i}` }, false));
    await ctx.sql`
      select graphile_worker.add_job('email__send', json_build_object('email_id', id, 'project_id', ${projectId}::text), max_attempts := 25, job_key := id)
      from unnest(${ids}::text[]) as id`;
    await waitFor('every throttled email to be sent', async () => (await statuses(projectId)).sent?.n === warm + backlog, 60_000, 100);
  } finally {
    ses.hooks.beforeAccount = undefined;
    putBack();
    await Promise.all(workers.map((w) => stopProcess(w)));
  }
  process.stdout.write(`# rate dropped from 40 to ${rate} after connect, ${processes} worker processes, ${backlog} emails of backlog: throttles ${ses.stats.throttled} (allowed ${2 + rate})\n`);
  assert.deepEqual(Object.keys(await statuses(projectId)), ['sent']);
  // For looking into a failure: each email sent on a second attempt, with what SES was asked.
  const retried = await ctx.sql<{ id: string; attemptCount: number; lastError: string | null; providerMessageId: string }[]>`
    select id, attempt_count, last_error, provider_message_id from emails where project_id = ${projectId} and attempt_count > 1`;
  assert.equal((await statuses(projectId)).sent!.attempts, 1, `a throttle is not an attempt: ${JSON.stringify(retried)}; SES ${JSON.stringify(ses.stats)}`);
  assert.ok(ses.stats.throttled > 0, 'SES did throttle');
  assert.ok(ses.stats.throttled <= 2 + rate, `throttles at most 2 plus the rate, saw ${ses.stats.throttled}`);
});

test('an email of n recipients takes n of the rate: 10 emails of 5 recipients at MaxSendRate 10 never put more than 10 recipients in a second', { timeout: 60_000 }, async () => {
  resetSes(10);
  const projectId = await sesProject('recipients', { maxSendRate: 10, max24HourSend: 50_000 });
  const to = (i: number) => [1, 2, 3, 4, 5].map((r) => `r${r}-${i}@example.net`);
  for (let i = 0; i < 10; i++) await insertEmail(ctx.sql, projectId, { subject: `Five ${i}`, to: to(i).slice(0, 3), cc: to(i).slice(3, 4), bcc: to(i).slice(4) });
  const worker = await startTestWorker(ctx.config, ctx.sql);
  await waitFor('every five-recipient email to be sent', async () => (await statuses(projectId)).sent?.n === 10, 40_000, 100);
  await worker.stop();
  const peak = ses.peakRecipientsPerSecond();
  process.stdout.write(`# 10 emails x 5 recipients at MaxSendRate 10: most recipients in one second ${peak}, throttles ${ses.stats.throttled}, sends ${ses.accepted.length}\n`);
  assert.equal(ses.acceptedRecipients.reduce((a, b) => a + b, 0), 50);
  assert.ok(peak <= 10, `at most 10 recipients in any second, saw ${peak}`);
  assert.equal(ses.stats.throttled, 0, 'SES throttled nothing');
  const [view] = await ctx.sql<[{ sentLast24h: number }]>`select sent_last_24h::int from ops.providers where project_id = ${projectId}`;
  assert.equal(view.sentLast24h, 50, 'the day counts recipients');
});

test('projects connected with one access key id in one region share one pace and one daily count', { timeout: 60_000 }, async () => {
  resetSes(5);
  const a = await sesProject('shared-a', { maxSendRate: 5, max24HourSend: 30 }, 'AKIDSHARED');
  const b = await sesProject('shared-b', { maxSendRate: 5, max24HourSend: 30 }, 'AKIDSHARED');
  const other = await sesProject('shared-other', { maxSendRate: 5, max24HourSend: 30 }, 'AKIDOTHER');
  for (let i = 0; i < 12; i++) await insertEmail(ctx.sql, i % 2 ? a : b, { subject: `Shared ${i}` });
  const worker = await startTestWorker(ctx.config, ctx.sql);
  await waitFor('both projects\' emails to be sent', async () => (await statuses(a)).sent?.n === 6 && (await statuses(b)).sent?.n === 6, 40_000, 100);
  await worker.stop();
  assert.ok(ses.peakRecipientsPerSecond() <= 5, `the two projects together stay at the account's 5/s, saw ${ses.peakRecipientsPerSecond()}`);
  assert.equal(ses.stats.throttled, 0);
  const rows = await ctx.sql<{ projectId: string; sesAccountId: string; sentLast24h: number; projectsOnAccount: number }[]>`
    select project_id, ses_account_id::text, sent_last_24h::int, projects_on_account::int from ops.providers
    where project_id in (${a}, ${b}, ${other}) order by project_id`;
  const byProject = Object.fromEntries(rows.map((r) => [r.projectId, r]));
  assert.equal(byProject[a]!.sesAccountId, byProject[b]!.sesAccountId, 'one account row');
  assert.notEqual(byProject[other]!.sesAccountId, byProject[a]!.sesAccountId, 'another key is another account');
  assert.deepEqual([byProject[a]!.sentLast24h, byProject[b]!.sentLast24h, byProject[other]!.sentLast24h], [12, 12, 0], 'one daily count for both');
  assert.equal(byProject[a]!.projectsOnAccount, 2);
  // The account's quota of 30 a day is shared: 18 more fit, and the 19th waits for the window.
  assert.ok('waitMs' in await reserveSendSlot(ctx.sql, a, 17), '17 more recipients fit the day');
  assert.ok('quotaWaitMs' in await reserveSendSlot(ctx.sql, b, 2), 'two more do not, from either project');
  assert.ok('quotaWaitMs' in await reserveSendSlot(ctx.sql, a, 2), 'nor from the other: the day is shared');
  assert.ok('waitMs' in await reserveSendSlot(ctx.sql, other), 'another account\'s day is its own');
  const stored = await ctx.sql`select access_key_digest from ses_accounts where id = ${byProject[a]!.sesAccountId}::bigint`;
  assert.ok(!String(stored[0]!.accessKeyDigest).includes('AKIDSHARED'), 'the account row keeps no copy of the key');
});

test('the daily-quota check reads a running counter, never the emails: the same cost at 10 and 100,000 sends a day', async () => {
  resetSes(1000);
  const projectId = await sesProject('counter', { maxSendRate: 1000, max24HourSend: 200_000 });
  // 100,000 sent emails of the day, as a busy account has.
  await ctx.sql`
    insert into emails (id, project_id, status, from_address, to_addresses, subject, sent_at)
    select left(mailroom_id_floor('email_', now()), 16) || lpad(i::text, 16, '0'), ${projectId}, 'sent', 'a@example.com', array['b@example.net'], 's', now() - interval '1 hour'
    from generate_series(1, 100000) i`;
  await ctx.sql`analyze emails`;
  const reader = createSql(ctx.url, { max: 1 });
  const emailReads = async () => {
    await reader`select pg_stat_force_next_flush()`;
    await new Promise((r) => setTimeout(r, 50));
    const [row] = await ctx.sql<[{ n: number }]>`
      select (select sum(coalesce(seq_scan, 0) + coalesce(idx_scan, 0)) from pg_stat_user_tables
              where relid in (select relid from pg_partition_tree('emails')))::int as n
      from (select pg_stat_clear_snapshot()) cleared`;
    return row.n;
  };
  try {
    const before = await emailReads();
    const started = performance.now();
    for (let i = 0; i < 20; i++) assert.ok('waitMs' in await reserveSendSlot(reader, projectId));
    const ms = performance.now() - started;
    // Twenty reservations that each read the emails would add at least 20. Another connection's
    // earlier read can reach the statistics late (backends flush them at most once a second), so
    // a stray one is not theirs; the plan below is the exact check.
    const reads = (await emailReads()) - before;
    assert.ok(reads < 20, `taking slots and checking the day read the emails ${reads} times`);
    const plan = await ctx.sql.unsafe(`explain select * from mailroom_take_send_slots('${projectId}', 1, 0.85, 2000, 1)`);
    assert.ok(!JSON.stringify(plan).includes('emails'), 'nor does its plan');
    await reader`select count(*) from emails where project_id = ${projectId}`;
    assert.ok(await emailReads() > before, 'a read of the emails would have been counted');
    process.stdout.write(`# 20 slot reservations with 100,000 sends today: ${ms.toFixed(1)} ms\n`);
  } finally {
    await reader.end();
    await ctx.sql`delete from emails where project_id = ${projectId}`;
  }
});

test('a spent daily quota keeps emails queued, without an attempt, until the window allows', async () => {
  resetSes(100, 2);
  const projectId = await sesProject('quota', { maxSendRate: 100, max24HourSend: 1000 });
  const task = emailSendTask({ config: ctx.config, sql: ctx.sql, log: createLogger('silent') });
  const ids = [];
  for (let i = 0; i < 3; i++) ids.push(await insertEmail(ctx.sql, projectId, {}, false));
  for (const id of ids) await task({ email_id: id, project_id: projectId }, noHelpers);
  // SES refused the third: "Daily message quota exceeded".
  assert.deepEqual((await Promise.all(ids.map((id) => emailState(ctx.sql, projectId, id)))).map((s) => [s.status, s.attemptCount]),
    [['sent', 1], ['sent', 1], ['queued', 0]]);
  assert.equal(ses.stats.quotaRefused, 1);
  const [job] = await ctx.sql<[{ delay: number }]>`
    select extract(epoch from run_at - now())::float8 as delay from graphile_worker.jobs where key = ${ids[2]!}`;
  assert.ok(job.delay > 60, `re-run later, when the quota allows (${job.delay} s)`);

  // Once SES's quota is known to be spent, Mailroom does not even ask.
  await ctx.sql`update ses_accounts set max_24_hour_send = 2 where id = (select ses_account_id from provider_connections where project_id = ${projectId})`;
  const before = ses.requests.length;
  await task({ email_id: ids[2]!, project_id: projectId }, noHelpers);
  assert.equal(ses.requests.length, before);
  assert.deepEqual(await emailState(ctx.sql, projectId, ids[2]!).then((s) => [s.status, s.attemptCount]), ['queued', 0]);
  const [view] = await ctx.sql<[{ sentLast24h: number; max24HourSend: number }]>`
    select sent_last_24h::int, max_24_hour_send from ops.providers where project_id = ${projectId}`;
  assert.deepEqual(view, { sentLast24h: 2, max24HourSend: 2 });
  await ctx.sql`select graphile_worker.remove_job(${ids[2]!})`;
});

test('a send whose outcome is unknown is retried once, with the same Message-ID', async () => {
  resetSes(100);
  const projectId = await sesProject('unknown', { maxSendRate: 100, max24HourSend: 50_000 });
  const worker = await startTestWorker(ctx.config, ctx.sql);
  ses.answer({ acceptThenDrop: true });
  const id = await insertEmail(ctx.sql, projectId);
  await waitFor('the retried email to be sent', async () => (await emailState(ctx.sql, projectId, id)).status === 'sent', 15_000);
  await worker.stop();
  const sends = ses.requests.filter((r) => r.raw.includes(id));
  assert.equal(sends.length, 2, 'one retry');
  const messageIds = sends.map((r) => /^Message-ID: (.+)\r$/im.exec(r.raw)?.[1]);
  assert.equal(messageIds[0], `<${id}@example.com>`);
  assert.equal(messageIds[1], messageIds[0]);
  assert.equal(ses.accepted.length, 2, 'SES got it twice: delivery is at least once');
});

test('a second claimer finds the live lease and sends nothing; a dead pool\'s lease is taken over', async () => {
  resetSes(100);
  const projectId = await sesProject('lease', { maxSendRate: 100, max24HourSend: 50_000 });
  const id = await insertEmail(ctx.sql, projectId, {}, false);
  await ctx.sql`insert into worker_heartbeats (pool_id, hostname, pid) values ('live-pool', 'test', 1)`;
  const held = await claimEmail(ctx.sql, projectId, id, { owner: 'live-pool/a', seconds: 45, deadAfterSeconds: 30 });
  assert.ok(held);
  const task = emailSendTask({ config: ctx.config, sql: ctx.sql, log: createLogger('silent') });
  const before = ses.requests.length;
  await task({ email_id: id, project_id: projectId }, noHelpers);
  assert.equal(ses.requests.length, before, 'nothing was sent');
  assert.deepEqual(await emailState(ctx.sql, projectId, id).then((s) => [s.status, s.attemptCount]), ['sending', 1]);
  const [job] = await ctx.sql<[{ delay: number }?]>`
    select extract(epoch from run_at - now())::float8 as delay from graphile_worker.jobs where key = ${id}`;
  assert.ok(job && job.delay > 40 && job.delay < 50, 'looked at again when the lease ends');

  // A missing heartbeat row (a sweep removed it, say, after an outage) never overrides a live lease.
  await ctx.sql`delete from worker_heartbeats where pool_id = 'live-pool'`;
  await task({ email_id: id, project_id: projectId }, noHelpers);
  assert.equal(ses.requests.length, before, 'nothing was sent');
  assert.deepEqual(await emailState(ctx.sql, projectId, id).then((s) => [s.status, s.attemptCount]), ['sending', 1]);

  // The holder's pool is declared ended, as a sweep by a worker that kept beating does: its lease no longer protects the email.
  await ctx.sql`insert into worker_heartbeats (pool_id, hostname, pid, last_seen_at, ended_at) values ('live-pool', 'test', 1, '-infinity', now())`;
  await task({ email_id: id, project_id: projectId }, noHelpers);
  assert.deepEqual(await emailState(ctx.sql, projectId, id).then((s) => [s.status, s.attemptCount]), ['sent', 2]);
  await ctx.sql`select graphile_worker.remove_job(${id})`;
});
