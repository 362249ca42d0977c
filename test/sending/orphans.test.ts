import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { insertEmail } from './fixtures.ts';
import { requeueOrphans } from '../../src/emails/orphans.task.ts';
import { buildCrontab } from '../../src/tasks.ts';
import { createLogger } from '../../src/platform/log.ts';
import type { WorkerDeps } from '../../src/interfaces.ts';

const ctx = await createTestContext();
const log = createLogger('silent');

const jobOf = async (id: string) => {
  const rows = await ctx.sql<{ runAt: Date; priority: number }[]>`select run_at, priority from graphile_worker._private_jobs where key = ${id}`;
  return rows[0];
};

test('an unsent email whose send job is gone gets one again and is sent; mail with a job, a live lease, a paused project or a recent change is left as it is', async () => {
  const { projectId } = await ctx.tenant('orphans');
  const { projectId: pausedProject } = await ctx.tenant('orphans-paused');
  await ctx.sql`insert into project_reputation (project_id, paused_at, pause_reason) values (${pausedProject}, now(), 'bounce_rate')`;
  const email = async (project: string, status: string, opts: { job?: boolean; minutesAgo?: number; lease?: 'live' | 'expired'; scheduledIn?: string } = {}) => {
    const id = await insertEmail(ctx.sql, project, { subject: status }, opts.job ?? false);
    await ctx.sql`
      update emails set status = ${status}, updated_at = now() - make_interval(mins => ${opts.minutesAgo ?? 11}),
        scheduled_at = ${opts.scheduledIn ? ctx.sql`now() + ${opts.scheduledIn}::interval` : null},
        lease_owner = ${opts.lease ? 'pool-gone/abc' : null},
        lease_expires_at = ${opts.lease === 'live' ? ctx.sql`now() + interval '1 minute'` : opts.lease === 'expired' ? ctx.sql`now() - interval '1 minute'` : null}
      where id = ${id} and project_id = ${project}`;
    return id;
  };
  const lostQueued = await email(projectId, 'queued');
  const lostSending = await email(projectId, 'sending', { lease: 'expired' });
  const lostScheduled = await email(projectId, 'scheduled', { scheduledIn: '1 hour' });
  const withJob = await email(projectId, 'queued', { job: true });
  const recent = await email(projectId, 'queued', { minutesAgo: 2 });
  const leased = await email(projectId, 'sending', { lease: 'live' });
  const held = await email(pausedProject, 'queued');
  const jobBefore = await jobOf(withJob);

  assert.equal(await requeueOrphans(ctx.sql, log), 3);
  assert.ok(await jobOf(lostQueued), 'the queued email has a job again');
  assert.ok(await jobOf(lostSending), 'the sending email whose lease ran out has a job again');
  const scheduledJob = await jobOf(lostScheduled);
  assert.ok(scheduledJob && scheduledJob.runAt.getTime() > Date.now() + 55 * 60_000, 'the scheduled email\'s job is due at its schedule');
  assert.deepEqual(await jobOf(withJob), jobBefore, 'an email with its job is not touched');
  for (const id of [recent, leased, held]) assert.equal(await jobOf(id), undefined, `${id} is left without one`);
  assert.equal(await requeueOrphans(ctx.sql, log), 0, 'a second run finds nothing');

  // Through the worker: the two due ones are sent (the sink, as the project has no provider).
  const worker = await startTestWorker(ctx.config, ctx.sql);
  try {
    await waitFor('the requeued emails to be sent', async () => {
      const rows = await ctx.sql<{ status: string }[]>`select status from emails where id in ${ctx.sql([lostQueued, lostSending])} and project_id = ${projectId}`;
      return rows.every((r) => r.status === 'sent');
    }, 30_000, 50);
  } finally {
    await worker.stop();
  }
  const [heldRow] = await ctx.sql<[{ status: string }]>`select status from emails where id = ${held} and project_id = ${pausedProject}`;
  assert.equal(heldRow.status, 'queued', 'held mail stays held');
});

test('the sweep runs every ten minutes from the worker\'s crontab', () => {
  const cron = buildCrontab({} as WorkerDeps).find((c) => c.task === 'email__requeue_orphans');
  assert.equal(cron?.match, '*/10 * * * *');
});
