import { test } from 'node:test';
import assert from 'node:assert/strict';
import MailComposer from 'nodemailer/lib/mail-composer';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { newId } from '../../src/platform/ids.ts';
import { sendToSink } from '../../src/providers/sink-transport.ts';
import { classifySendError } from '../../src/providers/errors.ts';
import { internalEnvelopeId, internalSinkLogin, parseInternalEnvelopeId } from '../../src/sink/internal-auth.ts';
import { sinkAddress } from '../../src/sink/address.ts';
import { caughtId, smtpClient } from './helpers.ts';

const ctx = await createTestContext({ env: { SINK_SMTP_PORT: '0' } });
// The sink is one of the worker's services; the transport finds its ephemeral port.
const worker = await startTestWorker(ctx.config, ctx.sql);
const { port } = sinkAddress(ctx.config);

async function compose(subject: string) {
  return new MailComposer({
    from: 'App <app@example.com>', to: 'user@example.net', bcc: 'audit@example.org', subject, text: `body of ${subject}`,
  }).compile().build();
}

const stored = async (projectId: string) =>
  ctx.sql<{ id: string; emailId: string | null; raw: Buffer }[]>`
    select id, email_id, raw from sink_messages where project_id = ${projectId} order by id`;

test('the worker runs the sink on the ephemeral port', () => {
  assert.ok(port > 0 && port !== 1025);
});

test('sendToSink delivers the exact bytes, links the email and returns the sink id', async () => {
  const { key, projectId } = await ctx.tenant();
  const emailId = newId('email');
  const raw = await compose('linked');
  const { messageId } = await sendToSink(ctx.config, {
    projectId, emailId, from: 'app@example.com', recipients: ['user@example.net', 'audit@example.org'], raw,
  });
  assert.match(messageId, /^msg_[0-9A-Z]{26}$/);
  const msg = await (await ctx.call(key, `/v1/sink/messages/${messageId}`)).json();
  assert.equal(msg.email_id, emailId);
  assert.equal(msg.subject, 'linked');
  assert.deepEqual(msg.to, ['user@example.net']);
  assert.equal(msg.raw, raw.toString('utf8'));
  assert.doesNotMatch(msg.raw, /audit@example\.org/i, 'Bcc travels only in the envelope');
  const [row] = await stored(projectId);
  assert.ok(row!.raw.equals(raw));
});

test('concurrent sends over the pooled connections each keep their own email link', async () => {
  const { projectId } = await ctx.tenant();
  const emailIds = Array.from({ length: 20 }, () => newId('email'));
  const results = await Promise.all(emailIds.map(async (emailId) => {
    const { messageId } = await sendToSink(ctx.config, { projectId, emailId, from: 'app@example.com', recipients: ['u@example.net'], raw: await compose(emailId) });
    return { emailId, messageId };
  }));
  const rows = await ctx.sql<{ id: string; emailId: string; subject: string }[]>`
    select id, email_id, subject from sink_messages where project_id = ${projectId}`;
  assert.equal(rows.length, 20);
  for (const { emailId, messageId } of results) {
    const row = rows.find((r) => r.id === messageId);
    assert.equal(row?.emailId, emailId);
    assert.equal(row?.subject, emailId);
  }
});

test('an API key cannot claim an email link: its ENVID is ignored', async () => {
  const a = await ctx.tenant('a');
  const b = await ctx.tenant('b');
  const info = await smtpClient(port, { user: 'mailroom-internal', pass: b.key }).sendMail({
    envelope: { from: 'x@example.com', to: ['y@example.com'] },
    dsn: { id: internalEnvelopeId(a.projectId, newId('email')) },
    raw: await compose('forged'),
  });
  const [row] = await stored(b.projectId);
  assert.equal(row?.id, caughtId(info.response));
  assert.equal(row?.emailId, null);
  assert.equal((await stored(a.projectId)).length, 0);
});

test('a forged internal login is refused with 535', async () => {
  const { projectId } = await ctx.tenant();
  const genuine = internalSinkLogin(ctx.config.secretKey);
  const forgeries = [
    { user: genuine.user, pass: 'a'.repeat(64) },
    internalSinkLogin('another-secret-key-that-is-long-enough-000000'),
    { user: 'someone-else', pass: genuine.pass },
  ];
  for (const auth of forgeries) {
    await assert.rejects(
      smtpClient(port, auth).sendMail({
        envelope: { from: 'x@example.com', to: ['y@example.com'] },
        dsn: { id: internalEnvelopeId(projectId, newId('email')) },
        raw: await compose('forged'),
      }),
      (err: { responseCode?: number }) => err.responseCode === 535,
    );
  }
  assert.equal((await stored(projectId)).length, 0);
});

test('an internal session must name a valid project and email per message', async () => {
  const client = smtpClient(port, internalSinkLogin(ctx.config.secretKey));
  const raw = await compose('nameless');
  const is550 = (err: { responseCode?: number }) => err.responseCode === 550;
  await assert.rejects(client.sendMail({ envelope: { from: 'x@example.com', to: ['y@example.com'] }, raw }), is550);
  await assert.rejects(client.sendMail({ envelope: { from: 'x@example.com', to: ['y@example.com'] }, dsn: { id: 'proj_x:email_y' }, raw }), is550);
  assert.equal(parseInternalEnvelopeId(`${newId('project')}:${newId('email')}:extra`), undefined);
  assert.equal(parseInternalEnvelopeId(`${newId('email')}:${newId('project')}`), undefined);
});

test('a message for a project that does not exist is refused as temporary and throws', async () => {
  await assert.rejects(
    sendToSink(ctx.config, { projectId: newId('project'), emailId: newId('email'), from: 'a@example.com', recipients: ['b@example.com'], raw: await compose('orphan') }),
    (err: { responseCode?: number }) => err.responseCode === 451,
  );
});

test('with the sink stopped, sendToSink throws a retryable network error', async () => {
  await worker.stop();
  const err = await sendToSink(ctx.config, { projectId: 'proj_x', emailId: 'email_y', from: 'a@example.com', recipients: ['b@example.com'], raw: Buffer.from('Subject: x\r\n\r\nx\r\n') })
    .then(() => undefined, (e: Error & { code?: string }) => e);
  assert.ok(err, 'expected a rejection');
  assert.match(String(err.code), /^(ECONNECTION|ESOCKET|ECONNREFUSED)$/);
  assert.equal(classifySendError(err).retry, true);
});
