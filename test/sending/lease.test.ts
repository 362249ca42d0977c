import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import pg from 'pg';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { emailSendTask } from '../../src/emails/send.task.ts';
import { claimEmail } from '../../src/emails/queries.ts';
import { reassertLeases } from '../../src/emails/leases.ts';
import { startWorker } from '../../src/platform/worker.ts';
import { createLogger } from '../../src/platform/log.ts';
import { startCaptureSmtp } from './capture-smtp.ts';
import { emailState, insertEmail, noHelpers } from './fixtures.ts';
import { waitFor } from '../helpers/wait.ts';

const smtp = await startCaptureSmtp();
const ctx = await createTestContext({ env: { SINK_SMTP_PORT: String(smtp.port) } });
const task = emailSendTask({ config: ctx.config, sql: ctx.sql, log: createLogger('silent') });
const run = (projectId: string, emailId: string) => task({ email_id: emailId, project_id: projectId }, noHelpers);

/** Makes the updates of `emails` that match `when` fail, as they would with the database away; returns the undo. */
async function refuseEmailUpdates(when: string) {
  await ctx.sql.unsafe(`
    create function refuse_update() returns trigger language plpgsql as $$
      begin raise exception 'the database went away'; end $$;
    create trigger refuse_update before update on emails for each row when (${when}) execute function refuse_update()`);
  // Dropping a trigger on the partitioned table locks every partition, and may deadlock with the
  // worker's own retry of the refused update; the loser of that is this undo, so it tries again.
  return async () => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await ctx.sql.unsafe('drop trigger refuse_update on emails; drop function refuse_update()');
      } catch (err) {
        if ((err as { code?: string }).code !== '40P01' || attempt === 5) throw err;
      }
    }
  };
}

test('an accepted send whose record the database refuses keeps its lease, is recorded once the database answers, and is never sent again', async () => {
  const { projectId } = await ctx.tenant();
  const id = await insertEmail(ctx.sql, projectId, { subject: 'recording fails' }, false);
  // Recording the send fails, as when the database goes away just after the message left.
  const allow = await refuseEmailUpdates(`new.status = 'sent' and new.subject = 'recording fails'`);
  try {
    await run(projectId, id);
    const [held] = await ctx.sql<[{ status: string; live: boolean }]>`
      select status, lease_expires_at > now() as live from emails where id = ${id} and project_id = ${projectId}`;
    assert.deepEqual({ ...held }, { status: 'sending', live: true }, 'the lease is kept, so no other attempt sends it');
    // A retry of the job meanwhile finds the lease held and sends nothing.
    await run(projectId, id);
  } finally {
    await allow();
  }
  await waitFor('sent to be recorded', async () => (await emailState(ctx.sql, projectId, id)).status === 'sent', 10_000);
  const state = await emailState(ctx.sql, projectId, id);
  assert.equal(state.attemptCount, 1);
  assert.equal(smtp.messages.filter((m) => m.envid.endsWith(`:${id}`)).length, 1, 'accepted once, sent once');
});

test('a runner replaced after a database error first re-asserts the leases its process holds, before the old runner\'s jobs are released: a lease that ran out during the outage is live again and no other attempt takes it', async () => {
  const { projectId } = await ctx.tenant();
  const holder = { id: `holder-${randomUUID()}`, busy: new Map<string, string>() };
  // What an outage longer than a lease leaves: the send is this process's (its SES answer waits
  // to be recorded), its lease ran out, and its holder's heartbeat is as old as the outage.
  const held = await insertEmail(ctx.sql, projectId, { subject: 'held through an outage' }, false);
  const other = await insertEmail(ctx.sql, projectId, { subject: 'held by another process' }, false);
  await ctx.sql`update emails set status = 'sending', lease_owner = ${`${holder.id}/a`}, lease_expires_at = now() - interval '20 seconds' where id = ${held} and project_id = ${projectId}`;
  await ctx.sql`update emails set status = 'sending', lease_owner = 'holder-other/b', lease_expires_at = now() - interval '20 seconds' where id = ${other} and project_id = ${projectId}`;
  await ctx.sql`insert into worker_heartbeats (pool_id, hostname, pid, last_seen_at) values (${holder.id}, 'h', 1, now() - interval '65 seconds')`;
  holder.busy.set(held, projectId);
  holder.busy.set(other, projectId);

  let jobStarted!: () => void;
  let letJobEnd!: () => void;
  const started = new Promise<void>((resolve) => { jobStarted = resolve; });
  const ended = new Promise<void>((resolve) => { letJobEnd = resolve; });
  let jobLockedAtReassert: boolean | undefined;
  const handle = await startWorker({
    databaseUrl: ctx.url, sql: ctx.sql, log: createLogger('silent'), concurrency: 1, deadAfterSeconds: 30, holderId: holder.id,
    taskList: { hold: async () => { jobStarted(); await ended; } },
    beforeFetching: async (db) => {
      const { rows } = await db.query(`select locked_by is not null as locked from graphile_worker.jobs where task_identifier = 'hold'`);
      jobLockedAtReassert = rows[0]?.locked;
      return reassertLeases(db, holder);
    },
  });
  try {
    await ctx.sql`select graphile_worker.add_job('hold', '{}')`;
    await started;
    // The holder's heartbeat as it stood when the database came back (the first beat refreshed it).
    await ctx.sql`update worker_heartbeats set last_seen_at = now() - interval '65 seconds' where pool_id = ${holder.id}`;
    void handle.runner.stop(); // as graphile-worker does by itself after a database error
    await waitFor('the runner to be replaced', () => handle.restarts === 1, 5000, 25);
    assert.equal(jobLockedAtReassert, true, 're-asserted while the old runner still held its jobs');
    const leases = await ctx.sql<{ id: string; live: boolean }[]>`
      select id, lease_expires_at > now() + interval '40 seconds' as live from emails where project_id = ${projectId} and id in (${held}, ${other}) order by id`;
    assert.deepEqual(Object.fromEntries(leases.map((r) => [r.id, r.live])), { [held]: true, [other]: false }, 'only the leases this holder holds');
    const [beat] = await ctx.sql<[{ fresh: boolean }]>`select last_seen_at > now() - interval '5 seconds' as fresh from worker_heartbeats where pool_id = ${holder.id}`;
    assert.equal(beat?.fresh, true, 'the holder beat with it');
    const taken = await claimEmail(ctx.sql, projectId, held, { owner: 'holder-else/c', seconds: 45, deadAfterSeconds: 30 });
    assert.equal(taken, undefined, 'another attempt finds the live lease and sends nothing');

    // A holder already declared ended re-asserts nothing: its leases are forfeit.
    await ctx.sql`update worker_heartbeats set ended_at = now() where pool_id = ${holder.id}`;
    await ctx.sql`update emails set lease_expires_at = now() - interval '1 second' where id = ${held} and project_id = ${projectId}`;
    const db = new pg.Pool({ connectionString: ctx.url, max: 1 });
    try {
      assert.equal(await reassertLeases(db, holder), 0);
    } finally {
      await db.end();
    }
  } finally {
    letJobEnd();
    await handle.stop();
    await ctx.sql`delete from graphile_worker._private_jobs where task_id in (select id from graphile_worker._private_tasks where identifier = 'hold')`;
  }
});

test('two jobs of one process for one email (a replaced runner\'s still running beside its successor\'s) send it once', async () => {
  const { projectId } = await ctx.tenant();
  const id = await insertEmail(ctx.sql, projectId, { subject: 'two jobs, one process' }, false);
  const leases = { id: `holder-${randomUUID()}`, busy: new Map<string, string>() };
  const inProcess = emailSendTask({ config: ctx.config, sql: ctx.sql, log: createLogger('silent'), leases });
  await Promise.all([1, 2].map(() => inProcess({ email_id: id, project_id: projectId }, noHelpers)));
  await waitFor('sent to be recorded', async () => (await emailState(ctx.sql, projectId, id)).status === 'sent', 10_000);
  assert.equal(smtp.messages.filter((m) => m.envid.endsWith(`:${id}`)).length, 1, 'sent once');
  assert.equal(leases.busy.size, 0, 'nothing left marked busy');
});
