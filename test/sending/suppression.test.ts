import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { emailSendTask, SINK_SMTP_RESPONSE } from '../../src/emails/send.task.ts';
import { createLogger } from '../../src/platform/log.ts';
import { addSuppressions, listSuppressions, suppressedAmong } from '../../src/suppressions/queries.ts';
import { startCaptureSmtp } from './capture-smtp.ts';
import { emailState, eventsOf, insertEmail, noHelpers } from './fixtures.ts';

// Projects without a provider connection send to the sink; here a capturing SMTP server stands
// in its place so the envelope of each transaction can be read.
const smtp = await startCaptureSmtp();
const ctx = await createTestContext({ env: { SINK_SMTP_PORT: String(smtp.port) } });
const task = emailSendTask({ config: ctx.config, sql: ctx.sql, log: createLogger('silent') });
const run = (projectId: string, emailId: string) => task({ email_id: emailId, project_id: projectId }, noHelpers);
const capturedFor = (emailId: string) => smtp.messages.filter((m) => m.envid.endsWith(`:${emailId}`));

test('addSuppressions stores bare lower-cased addresses, once, keeping the first reason', async () => {
  const { projectId } = await ctx.tenant();
  assert.equal(await addSuppressions(ctx.sql, projectId, ['Ann <Ann@Example.NET>', 'ann@example.net', 'zed@example.net'], 'bounced', null), 2);
  assert.equal(await addSuppressions(ctx.sql, projectId, ['ANN@example.net'], 'unsubscribed', null), 0);
  const { rows: list } = await listSuppressions(ctx.sql, projectId);
  assert.deepEqual(list.map((s) => [s.address, s.reason]).sort(), [['ann@example.net', 'bounced'], ['zed@example.net', 'bounced']]);
  assert.deepEqual([...await suppressedAmong(ctx.sql, projectId, ['"A" <ANN@example.net>', 'bob@example.net'])], ['ann@example.net']);
  const other = await ctx.tenant();
  assert.equal((await suppressedAmong(ctx.sql, other.projectId, ['ann@example.net'])).size, 0, 'suppressions are per project');
});

test('a suppressed recipient is dropped from the envelope; the others get the message', async () => {
  const { projectId } = await ctx.tenant();
  await addSuppressions(ctx.sql, projectId, ['bob@example.net'], 'complained');
  const id = await insertEmail(ctx.sql, projectId, {
    to: ['ann@example.net'], cc: ['Bob <BOB@Example.NET>'], bcc: ['hidden@example.net'],
  }, false);
  await run(projectId, id);
  const state = await emailState(ctx.sql, projectId, id);
  assert.equal(state.status, 'sent');
  assert.ok(state.sentAt && state.deliveredAt, 'the sink is the receiving server, so it is delivered too');
  const [msg] = capturedFor(id);
  assert.ok(msg);
  assert.deepEqual(msg.recipients.sort(), ['ann@example.net', 'hidden@example.net']);
  assert.equal(msg.from, 'sender@example.com');
  assert.doesNotMatch(msg.raw, /^Bcc:/im);
  const events = await eventsOf(ctx.sql, projectId, id);
  assert.deepEqual(events.map((e) => e.type), ['email.sent', 'email.delivered']);
  assert.deepEqual(events[0]!.data, { to: ['ann@example.net'], provider_message_id: state.providerMessageId, tags: [] });
  assert.deepEqual(events[1]!.data, { to: ['ann@example.net'], smtp_response: SINK_SMTP_RESPONSE, tags: [] });
});

test('with every recipient suppressed the email fails with recipient_suppressed and nothing is sent', async () => {
  const { projectId } = await ctx.tenant();
  await addSuppressions(ctx.sql, projectId, ['ann@example.net', 'cc@example.net'], 'bounced');
  const id = await insertEmail(ctx.sql, projectId, { to: ['ANN@example.net'], cc: ['Cc <cc@example.net>'] }, false);
  await run(projectId, id);
  const state = await emailState(ctx.sql, projectId, id);
  assert.equal(state.status, 'failed');
  assert.equal(state.lastError, 'recipient_suppressed');
  assert.equal(capturedFor(id).length, 0);
  const events = await eventsOf(ctx.sql, projectId, id);
  assert.deepEqual(events.map((e) => e.type), ['email.failed']);
  assert.equal(events[0]!.data.reason, 'recipient_suppressed');
});

test('another project\'s suppression list does not apply', async () => {
  const a = await ctx.tenant();
  const b = await ctx.tenant();
  await addSuppressions(ctx.sql, b.projectId, ['ann@example.net'], 'unsubscribed');
  const id = await insertEmail(ctx.sql, a.projectId, { to: ['ann@example.net'] }, false);
  await run(a.projectId, id);
  assert.equal((await emailState(ctx.sql, a.projectId, id)).status, 'sent');
  assert.deepEqual(capturedFor(id)[0]!.recipients, ['ann@example.net']);
});

test('safe to run twice: a sent or failed email is left alone', async () => {
  const { projectId } = await ctx.tenant();
  const id = await insertEmail(ctx.sql, projectId, {}, false);
  await run(projectId, id);
  const first = await emailState(ctx.sql, projectId, id);
  assert.equal(first.status, 'sent');
  await run(projectId, id);
  await run(projectId, id);
  assert.deepEqual(await emailState(ctx.sql, projectId, id), first);
  assert.equal(capturedFor(id).length, 1, 'sent once');
  assert.equal((await eventsOf(ctx.sql, projectId, id)).length, 2);

  await addSuppressions(ctx.sql, projectId, ['gone@example.net'], 'bounced');
  const failedId = await insertEmail(ctx.sql, projectId, { to: ['gone@example.net'] }, false);
  await run(projectId, failedId);
  const failed = await emailState(ctx.sql, projectId, failedId);
  await ctx.sql`delete from suppressions where project_id = ${projectId}`;
  await run(projectId, failedId);
  assert.deepEqual(await emailState(ctx.sql, projectId, failedId), failed);
  assert.equal(capturedFor(failedId).length, 0);
});

test('an attempt cut short in `sending` (a crash) is taken up again by the next run', async () => {
  const { projectId } = await ctx.tenant();
  const id = await insertEmail(ctx.sql, projectId, {}, false);
  await ctx.sql`update emails set status = 'sending', attempt_count = 1 where id = ${id} and project_id = ${projectId}`;
  await run(projectId, id);
  const state = await emailState(ctx.sql, projectId, id);
  assert.equal(state.status, 'sent');
  assert.equal(state.attemptCount, 2);
});
