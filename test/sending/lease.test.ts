import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { emailSendTask } from '../../src/emails/send.task.ts';
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
  return () => ctx.sql.unsafe('drop trigger refuse_update on emails; drop function refuse_update()');
}

test('an attempt that ends on an error of its own gives up its lease, so the retry sends at once', async () => {
  const { projectId } = await ctx.tenant();
  const id = await insertEmail(ctx.sql, projectId, { subject: 'recording fails' }, false);
  // Recording the send fails, as when the database goes away just after the message left.
  const allow = await refuseEmailUpdates(`new.status = 'sent' and new.subject = 'recording fails'`);
  try {
    await assert.rejects(async () => run(projectId, id), /the database went away/);
  } finally {
    await allow();
  }
  const [held] = await ctx.sql<[{ status: string; live: boolean }]>`
    select status, lease_expires_at > now() as live from emails where id = ${id} and project_id = ${projectId}`;
  assert.deepEqual({ ...held }, { status: 'sending', live: false });

  // The job's retry (graphile-worker runs it again after the error) claims it straight away.
  await run(projectId, id);
  const state = await emailState(ctx.sql, projectId, id);
  assert.equal(state.status, 'sent');
  assert.equal(state.attemptCount, 2);
  assert.equal(smtp.messages.filter((m) => m.envid.endsWith(`:${id}`)).length, 2, 'sent again: delivery is at least once');
});

test('a give-up the database refuses is made once it answers, and the email runs again at once instead of waiting out its lease', async () => {
  const { projectId } = await ctx.tenant();
  const id = await insertEmail(ctx.sql, projectId, { subject: 'database away' }, false);
  // Both recording the send and giving the lease up fail, as while the database is away.
  const allow = await refuseEmailUpdates(`new.subject = 'database away' and (new.status = 'sent' or new.lease_expires_at <= now())`);
  try {
    await assert.rejects(async () => run(projectId, id), /the database went away/);
    const [held] = await ctx.sql<[{ live: boolean }]>`
      select lease_expires_at > now() as live from emails where id = ${id} and project_id = ${projectId}`;
    assert.equal(held.live, true, 'the give-up was refused');
  } finally {
    await allow();
  }

  // The database answers again: the give-up is made in the background, with the job due now.
  await waitFor('the lease to be given up', async () => {
    const [row] = await ctx.sql<[{ live: boolean }]>`
      select lease_expires_at > now() as live from emails where id = ${id} and project_id = ${projectId}`;
    return !row.live;
  }, 10_000);
  const [job] = await ctx.sql<[{ due: boolean }]>`select run_at <= now() as due from graphile_worker.jobs where key = ${id}`;
  assert.equal(job.due, true, 'the email\'s job runs again now');
  await run(projectId, id);
  const state = await emailState(ctx.sql, projectId, id);
  assert.equal(state.status, 'sent');
  assert.equal(state.attemptCount, 2);
});
