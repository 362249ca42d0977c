import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addDomain, checkDomain } from '../../src/domains/service.ts';
import { toDomainResponse } from '../../src/domains/schemas.ts';
import { ServiceError } from '../../src/platform/errors.ts';
import { domainsContext } from './setup.ts';

const { ses, ctx, project } = await domainsContext();
const { sql, config } = ctx;

async function history(id: string) {
  const [row] = await sql<[{ statusHistory: Array<{ at: string; field: string; from: string | null; to: string | null }>; statusChangedAt: Date | null }]>`
    select status_history, status_changed_at from domains where id = ${id}`;
  return row;
}

test('add creates an Easy DKIM identity and exposes three CNAME records', async () => {
  const { projectId } = await project();
  const before = ses.requests.length;
  const d = await addDomain(sql, config, projectId, 'Send.Example.com');
  const create = ses.requests.slice(before).find((r) => r.method === 'POST');
  assert.deepEqual(create?.body, { EmailIdentity: 'send.example.com' }, 'no DkimSigningAttributes: Easy DKIM');
  assert.equal(create?.region, 'us-east-1');

  const r = toDomainResponse(d);
  assert.match(r.id, /^dom_[0-9A-Z]{26}$/);
  assert.equal(r.value, 'send.example.com');
  assert.equal(r.region, 'us-east-1');
  assert.equal(r.verification_status, 'pending');
  assert.equal(r.dkim_status, 'pending');
  assert.equal(r.mail_from_status, null);
  assert.equal(r.last_checked_at, null);
  const tokens = ses.identity('send.example.com')!.tokens;
  assert.deepEqual(r.dns_records, tokens.map((t) => ({
    record_type: 'CNAME', name: `${t}._domainkey.send.example.com`, value: `${t}.dkim.amazonses.com`,
  })));
});

test('check reads the new statuses and appends status_history', async () => {
  const { projectId } = await project();
  const d = await addDomain(sql, config, projectId, 'flip.example.com');
  ses.setStatus('flip.example.com', { verification: 'SUCCESS', dkim: 'SUCCESS' });
  const started = Date.now();
  const checked = await checkDomain(sql, config, undefined, d.id);
  assert.equal(checked.verificationStatus, 'success');
  assert.equal(checked.dkimStatus, 'success');
  assert.ok(checked.lastCheckedAt && checked.lastCheckedAt.getTime() >= started - 1000);
  const h = await history(d.id);
  assert.deepEqual(h!.statusHistory.map(({ field, from, to }) => ({ field, from, to })), [
    { field: 'verification_status', from: 'pending', to: 'success' },
    { field: 'dkim_status', from: 'pending', to: 'success' },
  ]);
  assert.ok(h!.statusChangedAt);
  assert.ok(!Number.isNaN(Date.parse(h!.statusHistory[0]!.at)));

  // Unchanged statuses leave history alone but still move last_checked_at.
  const again = await checkDomain(sql, config, undefined, d.id);
  assert.equal((await history(d.id))!.statusHistory.length, 2);
  assert.ok(again.lastCheckedAt!.getTime() >= checked.lastCheckedAt!.getTime());
  assert.equal((await history(d.id))!.statusChangedAt!.getTime(), h!.statusChangedAt!.getTime());
});

test('TEMPORARY_FAILURE and FAILED map to temporary_failure and failed', async () => {
  const { projectId } = await project();
  const d = await addDomain(sql, config, projectId, 'flaky.example.com');
  ses.setStatus('flaky.example.com', { verification: 'TEMPORARY_FAILURE', dkim: 'TEMPORARY_FAILURE' });
  let r = toDomainResponse(await checkDomain(sql, config, undefined, d.id));
  assert.equal(r.verification_status, 'temporary_failure');
  assert.equal(r.dkim_status, 'temporary_failure');
  ses.setStatus('flaky.example.com', { verification: 'FAILED', dkim: 'FAILED' });
  r = toDomainResponse(await checkDomain(sql, config, undefined, d.id));
  assert.equal(r.verification_status, 'failed');
  assert.equal(r.dkim_status, 'failed');
  assert.deepEqual((await history(d.id))!.statusHistory.map((e) => `${e.field}:${e.from}->${e.to}`), [
    'verification_status:pending->temporary_failure', 'dkim_status:pending->temporary_failure',
    'verification_status:temporary_failure->failed', 'dkim_status:temporary_failure->failed',
  ]);
});

test('no SES connection: a clear error, no SES call and nothing stored', async () => {
  const { projectId } = await project({ connected: false });
  const before = ses.requests.length;
  await assert.rejects(addDomain(sql, config, projectId, 'lonely.example.com'), (err: unknown) =>
    err instanceof ServiceError && /no SES connection/.test(err.message));
  assert.equal(ses.requests.length, before);
  assert.equal((await sql`select 1 from domains where project_id = ${projectId}`).length, 0);
});

test('an identity that already exists in SES is adopted with its tokens and statuses', async () => {
  const { projectId } = await project();
  const existing = ses.preexisting('adopted.example.com', 'us-east-1', { verification: 'SUCCESS', dkim: 'SUCCESS' });
  const d = await addDomain(sql, config, projectId, 'adopted.example.com');
  assert.equal(d.verificationStatus, 'success');
  assert.equal(d.dkimStatus, 'success');
  assert.deepEqual(d.dkimTokens, existing.tokens);
  assert.ok(d.lastCheckedAt, 'adopting read the identity from SES');
});

test('--region creates the identity in that region with the same keys', async () => {
  const { projectId } = await project();
  const before = ses.requests.length;
  const d = await addDomain(sql, config, projectId, 'eu.example.com', { region: 'eu-west-1' });
  assert.equal(d.region, 'eu-west-1');
  assert.ok(ses.identity('eu.example.com', 'eu-west-1'));
  assert.equal(ses.identity('eu.example.com', 'us-east-1'), undefined);
  ses.setStatus('eu.example.com', { verification: 'SUCCESS' }, 'eu-west-1');
  assert.equal((await checkDomain(sql, config, undefined, d.id)).verificationStatus, 'success');
  assert.ok(ses.requests.slice(before).every((r) => r.region === 'eu-west-1'));
  await assert.rejects(addDomain(sql, config, projectId, 'bad-region.example.com', { region: 'mars' }), /not an AWS region/);
});

test('custom MAIL FROM: set in SES, stored, and published as MX and SPF records', async () => {
  const { projectId } = await project();
  const d = await addDomain(sql, config, projectId, 'mf.example.com', { mailFrom: 'bounce' });
  const put = ses.requests.find((r) => r.method === 'PUT' && r.path === '/v2/email/identities/mf.example.com/mail-from');
  assert.deepEqual(put?.body, { MailFromDomain: 'bounce.mf.example.com' });
  assert.equal(d.mailFromDomain, 'bounce.mf.example.com');
  assert.equal(d.mailFromStatus, 'pending');
  const records = toDomainResponse(d).dns_records!;
  assert.equal(records.filter((r) => r.record_type === 'CNAME').length, 3);
  assert.deepEqual(records.filter((r) => r.record_type !== 'CNAME'), [
    { record_type: 'MX', name: 'bounce.mf.example.com', value: '10 feedback-smtp.us-east-1.amazonses.com' },
    { record_type: 'TXT', name: 'bounce.mf.example.com', value: '"v=spf1 include:amazonses.com ~all"' },
  ]);
  ses.setStatus('mf.example.com', { mailFrom: 'SUCCESS' });
  assert.equal((await checkDomain(sql, config, undefined, d.id)).mailFromStatus, 'success');
  await assert.rejects(addDomain(sql, config, projectId, 'mf2.example.com', { mailFrom: 'mf2.example.com' }), /subdomain/);
});

test('bad names and duplicates are refused before SES is called', async () => {
  const { projectId } = await project();
  await addDomain(sql, config, projectId, 'dup.example.com');
  const before = ses.requests.length;
  for (const [input, message] of [
    ['https://x.example.com', /scheme/], ['x.example.com/path', /path/], ['x.example.com:587', /port/],
    ['x example.com', /spaces/], ['intranet', /single label/], ['203.0.113.9', /IP address/],
    [`${'a'.repeat(64)}.example.com`, /longer than 63/], ['DUP.example.com', /already in project/],
    ['dup.example.com.', /already in project/],
  ] as const) {
    await assert.rejects(addDomain(sql, config, projectId, input), (err: unknown) => err instanceof ServiceError && message.test(err.message), input);
  }
  assert.equal(ses.requests.length, before, 'SES never called');
  assert.equal((await sql`select 1 from domains where project_id = ${projectId}`).length, 1);
});

test('an IDN is stored and registered in its ASCII form', async () => {
  const { projectId } = await project();
  const d = await addDomain(sql, config, projectId, 'Bücher.Example');
  assert.equal(d.value, 'xn--bcher-kva.example');
  assert.ok(ses.identity('xn--bcher-kva.example'));
  await assert.rejects(addDomain(sql, config, projectId, 'xn--bcher-kva.example'), /already in project/);
});

test('SES errors surface as a clear error and store nothing', async () => {
  const { projectId } = await project();
  ses.failNext('CreateEmailIdentity', { status: 400, type: 'LimitExceededException', message: 'Maximum number of identities reached' });
  await assert.rejects(addDomain(sql, config, projectId, 'limit.example.com'), (err: unknown) =>
    err instanceof ServiceError && /LimitExceededException: Maximum number of identities/.test(err.message));
  // MAIL FROM refused after the identity was made: nothing stored, and a retry adopts it.
  ses.failNext('PutEmailIdentityMailFromAttributes', { status: 400, type: 'BadRequestException', message: 'nope' });
  await assert.rejects(addDomain(sql, config, projectId, 'half.example.com', { mailFrom: 'mail' }), /BadRequestException/);
  assert.equal((await sql`select 1 from domains where project_id = ${projectId}`).length, 0);
  const d = await addDomain(sql, config, projectId, 'half.example.com', { mailFrom: 'mail' });
  assert.equal(d.mailFromDomain, 'mail.half.example.com');
});

test('check: another project cannot reach the domain; provider errors leave it untouched', async () => {
  const a = await project();
  const b = await project();
  const d = await addDomain(sql, config, a.projectId, 'mine.example.com');
  await assert.rejects(checkDomain(sql, config, b.projectId, d.id), /not found/);
  await assert.rejects(checkDomain(sql, config, undefined, 'dom_nope'), /not found/);
  ses.failNext('GetEmailIdentity', { status: 429, type: 'TooManyRequestsException', message: 'Rate exceeded' });
  await assert.rejects(checkDomain(sql, config, a.projectId, d.id), /TooManyRequestsException/);
  const [row] = await sql`select last_checked_at from domains where id = ${d.id}`;
  assert.equal(row!.lastCheckedAt, null);
});

test('an identity deleted in SES reads as not_started', async () => {
  const { projectId } = await project();
  const d = await addDomain(sql, config, projectId, 'gone.example.com');
  ses.remove('gone.example.com');
  const checked = await checkDomain(sql, config, undefined, d.id);
  assert.equal(checked.verificationStatus, 'not_started');
  assert.equal(checked.dkimStatus, null);
  assert.equal(checked.dkimTokens.length, 3, 'the records stay visible');
});
