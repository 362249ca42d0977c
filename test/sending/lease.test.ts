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
