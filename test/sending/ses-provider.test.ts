import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startFakeSes } from '../helpers/fake-ses.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { connectProvider } from '../../src/providers/connections.ts';
import { emailSendTask } from '../../src/emails/send.task.ts';
import { createLogger } from '../../src/platform/log.ts';
import { emailState, eventsOf, insertEmail, noHelpers, settled } from './fixtures.ts';

const fake = await startFakeSes();
const ctx = await createTestContext({
  env: { AWS_ENDPOINT_URL_SESV2: fake.url, EMAIL_RETRY_BASE_MS: '20', SINK_SMTP_PORT: '0' },
});
const { projectId } = await ctx.tenant('ses project');
await connectProvider(ctx.sql, ctx.config, {
  projectId, region: 'eu-west-1', accessKeyId: 'AKIDFAKESES', secretAccessKey: 'fake-secret-access-key', configurationSet: 'mailroom-events',
  sendQuota: { maxSendRate: 1000, max24HourSend: 1_000_000 },
});
await startTestWorker(ctx.config, ctx.sql);

const sendsFor = (emailId: string) => fake.requests.filter((r) => r.raw.includes(`<${emailId}@example.com>`));

test('sends raw MIME with SES v2 SendEmail: configuration set, signed request, envelope with bcc', async () => {
  const id = await insertEmail(ctx.sql, projectId, {
    to: ['Ann <ann@example.net>'], cc: ['cc@example.net'], bcc: ['hidden@example.net'], subject: 'Via SES',
  });
  const state = await settled(ctx.sql, projectId, id);
  assert.equal(state.status, 'sent');
  assert.equal(state.lastError, null);
  assert.equal(state.deliveredAt, null, 'only a delivery event sets delivered_at for SES');
  const [req] = sendsFor(id);
  assert.ok(req);
  assert.match(state.providerMessageId!, /^fake-ses-/);
  assert.equal(req.ConfigurationSetName, 'mailroom-events');
  assert.match(req.authorization, /^AWS4-HMAC-SHA256 Credential=AKIDFAKESES\/\d{8}\/eu-west-1\/ses\//);
  assert.deepEqual(req.Destination, { ToAddresses: ['ann@example.net'], CcAddresses: ['cc@example.net'], BccAddresses: ['hidden@example.net'] });
  assert.match(req.raw, /^Subject: Via SES\r$/m);
  assert.doesNotMatch(req.raw, /^Bcc:/im);
  assert.doesNotMatch(req.raw, /hidden@example\.net/);
  const events = await eventsOf(ctx.sql, projectId, id);
  assert.deepEqual(events.map((e) => e.type), ['email.sent']);
  assert.deepEqual(events[0]!.data, { to: ['Ann <ann@example.net>', 'cc@example.net'], provider_message_id: state.providerMessageId, tags: [] });
});

test('throttling is re-run without costing an attempt, then the email is sent', async () => {
  fake.answer({ status: 429, type: 'TooManyRequestsException', message: 'Maximum sending rate exceeded.' });
  const id = await insertEmail(ctx.sql, projectId);
  const state = await settled(ctx.sql, projectId, id);
  assert.equal(state.status, 'sent');
  assert.equal(state.attemptCount, 1);
  assert.equal(sendsFor(id).length, 2);
  assert.deepEqual((await eventsOf(ctx.sql, projectId, id)).map((e) => e.type), ['email.sent']);
});

test('a dropped connection and a 5xx are retried too', async () => {
  fake.answer({ drop: true }, { status: 503, type: 'ServiceUnavailable', message: 'Service unavailable' });
  const id = await insertEmail(ctx.sql, projectId);
  const state = await settled(ctx.sql, projectId, id);
  assert.equal(state.status, 'sent');
  assert.equal(state.attemptCount, 3);
});

for (const [answer, lastError] of [
  [{ status: 400, type: 'MessageRejected', message: 'Illegal address' }, 'message_rejected'],
  [{ status: 400, type: 'MessageRejected', message: 'Email address is not verified. The following identities failed the check in region EU-WEST-1: sender@example.com' }, 'domain_not_verified'],
  [{ status: 403, type: 'InvalidClientTokenId', message: 'The security token included in the request is invalid.' }, 'provider_auth_failed'],
  [{ status: 403, type: 'SignatureDoesNotMatch', message: 'The request signature we calculated does not match the signature you provided.' }, 'provider_auth_failed'],
  [{ status: 400, type: 'SendingPausedException', message: 'Sending is paused for this account.' }, 'sending_paused'],
] as const) {
  test(`${answer.type} (${answer.status}) fails the email with ${lastError}, once, with an email.failed event`, async () => {
    fake.answer(answer);
    const id = await insertEmail(ctx.sql, projectId);
    const state = await settled(ctx.sql, projectId, id);
    assert.equal(state.status, 'failed');
    assert.equal(state.lastError, lastError);
    assert.equal(state.providerMessageId, null);
    assert.equal(state.sentAt, null);
    assert.equal(sendsFor(id).length, 1, 'not retried');
    const events = await eventsOf(ctx.sql, projectId, id);
    assert.deepEqual(events.map((e) => e.type), ['email.failed']);
    assert.equal(events[0]!.data.reason, lastError);
    assert.equal(typeof events[0]!.data.message, 'string');
    assert.doesNotMatch(String(events[0]!.data.message), /fake-secret-access-key/);
    const res = await ctx.call((await ctx.tenant()).key, `/v1/emails/${id}`);
    assert.equal(res.status, 404, 'another project cannot read it');
  });
}

test('retries run out after the eighth attempt: provider_unavailable', async () => {
  // Five attempts already spent, so three more reach the limit quickly.
  const id = await insertEmail(ctx.sql, projectId, { attemptCount: 5 });
  fake.answer(...Array.from({ length: 3 }, () => ({ status: 500, type: 'InternalFailure', message: 'internal' })));
  const state = await settled(ctx.sql, projectId, id);
  assert.equal(state.status, 'failed');
  assert.equal(state.lastError, 'provider_unavailable');
  assert.equal(state.attemptCount, 8);
  assert.equal(sendsFor(id).length, 3);
  const events = await eventsOf(ctx.sql, projectId, id);
  assert.deepEqual(events.map((e) => [e.type, e.data.reason]), [['email.failed', 'provider_unavailable']]);
});

test('a retry is scheduled at base × 2^(attempt-1) and the email goes back to queued', async () => {
  const base = 60_000;
  const task = emailSendTask({ config: { ...ctx.config, emailRetryBaseMs: base }, sql: ctx.sql, log: createLogger('silent') });
  const id = await insertEmail(ctx.sql, projectId, { attemptCount: 2 }, false);
  fake.answer({ status: 503, type: 'ServiceUnavailable', message: 'try later' });
  await task({ email_id: id, project_id: projectId }, noHelpers);
  const state = await emailState(ctx.sql, projectId, id);
  assert.equal(state.status, 'queued');
  assert.equal(state.attemptCount, 3);
  assert.equal(state.lastError, null, 'last_error is only set on failed');
  const [job] = await ctx.sql<[{ delay: number; maxAttempts: number }]>`
    select extract(epoch from run_at - now())::float8 as delay, max_attempts from graphile_worker.jobs
    where key = ${id} and task_identifier = 'email__send'`;
  assert.ok(job, 'a keyed job is waiting');
  assert.ok(job.delay > 4 * 60 - 5 && job.delay <= 4 * 60, `third attempt waits 4 × base, got ${job.delay}s`);
  await ctx.sql`select graphile_worker.remove_job(${id})`;
});

test('the payload is validated and scoped to its project', async () => {
  const task = emailSendTask({ config: ctx.config, sql: ctx.sql, log: createLogger('silent') });
  await assert.rejects(async () => { await task({ email_id: 42 }, noHelpers); }, /email_id|project_id/);
  const other = await ctx.tenant('other');
  const id = await insertEmail(ctx.sql, projectId, {}, false);
  await task({ email_id: id, project_id: other.projectId }, noHelpers);
  const state = await emailState(ctx.sql, projectId, id);
  assert.equal(state.status, 'queued', 'a payload naming another project touches nothing');
  assert.equal(state.attemptCount, 0);
});

test('credentials sealed under another SECRET_KEY fail the email with provider_auth_failed, without a request', async () => {
  const rotated = { ...ctx.config, secretKey: 'a-different-secret-key-that-is-long-enough-42' };
  const task = emailSendTask({ config: rotated, sql: ctx.sql, log: createLogger('silent') });
  const id = await insertEmail(ctx.sql, projectId, {}, false);
  const before = fake.requests.length;
  await task({ email_id: id, project_id: projectId }, noHelpers);
  const state = await emailState(ctx.sql, projectId, id);
  assert.equal(state.status, 'failed');
  assert.equal(state.lastError, 'provider_auth_failed');
  assert.equal(fake.requests.length, before);
  const [event] = await eventsOf(ctx.sql, projectId, id);
  assert.match(String(event!.data.message), /Reconnect/);
});
