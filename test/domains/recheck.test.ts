import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCronItems, type JobHelpers } from 'graphile-worker';
import { addDomain } from '../../src/domains/service.ts';
import { domainCheckTask } from '../../src/domains/check.task.ts';
import { domainRecheckTask, dueDomains, enqueueDueChecks } from '../../src/domains/recheck.task.ts';
import { newId } from '../../src/platform/ids.ts';
import { createLogger } from '../../src/platform/log.ts';
import { buildCrontab, buildTaskList } from '../../src/tasks.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';
import { domainsContext } from './setup.ts';

const { ses, ctx, project } = await domainsContext();
const { sql, config } = ctx;
const deps = { config, sql, log: createLogger('silent') };
const helpers = {} as JobHelpers;

const NOW = new Date('2030-01-10T12:00:00Z');
const ago = (ms: number) => new Date(NOW.getTime() - ms);
const MIN = 60_000;
const HOUR = 60 * MIN;

async function seed(projectId: string, d: { created: number; checked?: number; v?: string; dkim?: string | null; mailFrom?: string | null }) {
  const id = newId('domain');
  await sql`
    insert into domains (id, project_id, value, region, verification_status, dkim_status, mail_from_status, created_at, last_checked_at)
    values (${id}, ${projectId}, ${`${id.toLowerCase()}.example.com`}, 'us-east-1', ${d.v ?? 'pending'},
      ${d.dkim === undefined ? d.v ?? 'pending' : d.dkim}, ${d.mailFrom ?? null},
      ${ago(d.created).toISOString()}::timestamptz, ${d.checked === undefined ? null : ago(d.checked).toISOString()}::timestamptz)`;
  return id;
}

async function checkJobs() {
  return sql<{ key: string; payload: { domain_id: string; project_id: string } }[]>`
    select j.key, j.payload from graphile_worker._private_jobs j
    join graphile_worker._private_tasks t on t.id = j.task_id
    where t.identifier = 'domain__check' order by j.key`;
}

test('due selection: 10 min in the first 72 h, then hourly; settled daily; never-checked at once', async () => {
  const { projectId } = await project();
  const offline = await project({ connected: false });
  const cases: Array<[string, Parameters<typeof seed>[1], boolean]> = [
    ['never checked', { created: 5 * MIN }, true],
    ['pending, young, 11 min', { created: HOUR, checked: 11 * MIN }, true],
    ['pending, young, 9 min', { created: HOUR, checked: 9 * MIN }, false],
    ['temporary_failure, young, 11 min', { created: HOUR, checked: 11 * MIN, v: 'temporary_failure' }, true],
    ['not_started, young, 9 min', { created: HOUR, checked: 9 * MIN, v: 'not_started' }, false],
    ['pending, 73 h old, 30 min', { created: 73 * HOUR, checked: 30 * MIN }, false],
    ['pending, 73 h old, 61 min', { created: 73 * HOUR, checked: 61 * MIN }, true],
    ['success, 23 h', { created: HOUR * 100, checked: 23 * HOUR, v: 'success' }, false],
    ['success, 25 h', { created: HOUR * 100, checked: 25 * HOUR, v: 'success' }, true],
    ['success, young, 11 min', { created: HOUR, checked: 11 * MIN, v: 'success' }, false],
    ['failed, 23 h', { created: HOUR * 100, checked: 23 * HOUR, v: 'failed' }, false],
    ['failed, 25 h', { created: HOUR * 100, checked: 25 * HOUR, v: 'failed' }, true],
    ['verified but DKIM pending, young, 11 min', { created: HOUR, checked: 11 * MIN, v: 'success', dkim: 'pending' }, true],
    ['verified, MAIL FROM pending, old, 61 min', { created: 100 * HOUR, checked: 61 * MIN, v: 'success', mailFrom: 'pending' }, true],
    ['verified, no DKIM status, 2 h', { created: 100 * HOUR, checked: 2 * HOUR, v: 'success', dkim: null }, false],
  ];
  const ids = new Map<string, string>();
  for (const [name, d] of cases) ids.set(name, await seed(projectId, d));
  const unconnected = await seed(offline.projectId, { created: MIN });
  const due = new Set((await dueDomains(sql, NOW)).map((r) => r.id));
  for (const [name, , expected] of cases) assert.equal(due.has(ids.get(name)!), expected, name);
  assert.ok(!due.has(unconnected), 'projects without a connection have nothing to ask');
  await sql`delete from domains`;
});

test('recheck enqueues one keyed check per due domain; check updates it; both are safe to repeat', async () => {
  const { projectId } = await project();
  const d = await addDomain(sql, config, projectId, 'tick.example.com');
  const settled = await seed(projectId, { created: HOUR, checked: MIN, v: 'success' });

  await domainRecheckTask(deps)({ _cron: { ts: new Date().toISOString(), backfilled: false } }, helpers);
  await domainRecheckTask(deps)({}, helpers);
  assert.equal(await enqueueDueChecks(sql), 1);
  const jobs = await checkJobs();
  assert.deepEqual([...jobs], [{ key: `domain_check:${d.id}`, payload: { domain_id: d.id, project_id: projectId } }], `not ${settled}`);

  ses.setStatus('tick.example.com', { verification: 'SUCCESS', dkim: 'SUCCESS' });
  const check = domainCheckTask(deps);
  await check(jobs[0]!.payload, helpers);
  await check(jobs[0]!.payload, helpers);
  const [row] = await sql<[{ verificationStatus: string; dkimStatus: string; lastCheckedAt: Date; statusHistory: unknown[] }]>`
    select verification_status, dkim_status, last_checked_at, status_history from domains where id = ${d.id}`;
  assert.equal(row.verificationStatus, 'success');
  assert.equal(row.dkimStatus, 'success');
  assert.ok(row.lastCheckedAt);
  assert.equal(row.statusHistory.length, 2, 'the second run found nothing new');
  assert.equal(await enqueueDueChecks(sql), 0, 'checked just now: not due');
  await sql`delete from graphile_worker._private_jobs`;
});

test('tasks refuse malformed payloads and log provider errors without throwing', async () => {
  const check = domainCheckTask(deps);
  await assert.rejects(Promise.resolve(check({ domainId: 42 }, helpers)), /invalid_type|expected string/i);
  await assert.rejects(Promise.resolve(domainRecheckTask(deps)('nope', helpers)));

  const { projectId } = await project();
  const d = await addDomain(sql, config, projectId, 'down.example.com');
  ses.failNext('GetEmailIdentity', { status: 503, type: 'ServiceUnavailable', message: 'try later' });
  await check({ domain_id: d.id, project_id: projectId }, helpers);
  const [row] = await sql`select last_checked_at from domains where id = ${d.id}`;
  assert.equal(row!.lastCheckedAt, null);
  assert.ok((await dueDomains(sql)).some((r) => r.id === d.id), 'still due: the next tick retries');
  // A job naming another project's domain does nothing.
  const other = await project();
  await check({ domainId: d.id, projectId: other.projectId }, helpers);
  assert.equal((await sql`select last_checked_at from domains where id = ${d.id}`)[0]!.lastCheckedAt, null);
  await sql`delete from graphile_worker._private_jobs`;
});

test('the crontab ticks domain__recheck every minute and both tasks are registered', () => {
  const cron = buildCrontab(deps).find((c) => c.task === 'domain__recheck');
  assert.equal(cron?.match, '* * * * *');
  assert.equal(parseCronItems([cron!]).length, 1);
  const tasks = buildTaskList(deps);
  assert.equal(typeof tasks.domain__recheck, 'function');
  assert.equal(typeof tasks.domain__check, 'function');
});

test('through the worker: a recheck tick on the queue verifies a domain end to end', async () => {
  const { projectId } = await project();
  const d = await addDomain(sql, config, projectId, 'worker.example.com');
  ses.setStatus('worker.example.com', { verification: 'SUCCESS', dkim: 'SUCCESS' });
  await startTestWorker(config, sql);
  await sql`select graphile_worker.add_job('domain__recheck', '{}'::json)`;
  const row = await waitFor('the worker to check the domain', async () => {
    const [r] = await sql`select verification_status, last_checked_at from domains where id = ${d.id} and project_id = ${projectId}`;
    return r?.lastCheckedAt ? r : undefined;
  }, 10_000);
  assert.equal(row.verificationStatus, 'success');
});
