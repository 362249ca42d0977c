import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext, TEST_SECRET_KEY } from '../helpers/app.ts';
import { startFakeSes } from '../helpers/fake-ses.ts';
import { emailSendTask } from '../../src/emails/send.task.ts';
import { createLogger } from '../../src/platform/log.ts';
import { connectProvider } from '../../src/providers/connections.ts';
import { signUnsubscribeToken, verifyUnsubscribeToken } from '../../src/unsubscribe/token.ts';
import { insertEmail, noHelpers } from './fixtures.ts';

const fake = await startFakeSes();
const ctx = await createTestContext({ env: { AWS_ENDPOINT_URL_SESV2: fake.url, PUBLIC_BASE_URL: 'https://mail.example.test/' } });

const suppressionsOf = async (projectId: string) => [
  ...await ctx.sql<{ address: string; reason: string; emailId: string | null }[]>`
    select address, reason, email_id from suppressions where project_id = ${projectId} order by address`,
];

/** Header lines of a raw message, unfolded (long values wrap onto continuation lines). */
const unfolded = (raw: string) => raw.slice(0, raw.indexOf('\r\n\r\n')).replace(/\r\n(?=[ \t])/g, '');

/** A project with one email to one recipient, and that email's unsubscribe token. */
async function recipientEmail() {
  const tenant = await ctx.tenant();
  const emailId = await insertEmail(ctx.sql, tenant.projectId, { to: ['Ann <Ann@Example.net>'] }, false);
  return { ...tenant, emailId, token: signUnsubscribeToken(ctx.config.secretKey, { projectId: tenant.projectId, emailId, recipient: 'Ann <Ann@Example.net>' }) };
}

function tamper(token: string): string[] {
  const [payload, sig] = token.split('.') as [string, string];
  const forged = Buffer.from(JSON.stringify({ p: 'proj_01JD3Z8K6Q5W0R1S2T3V4X5Y6Z', e: 'email_01JD3Z8K6Q5W0R1S2T3V4X5Y6Z' })).toString('base64url');
  const flip = (s: string) => (s[0] === 'A' ? 'B' : 'A') + s.slice(1);
  return [`${forged}.${sig}`, `${payload}.${flip(sig)}`, `${flip(payload)}.${sig}`, payload, `${payload}.`, `${payload}.${sig}.x`, 'x'.repeat(600)];
}

test('tokens round-trip, and any change or another SECRET_KEY makes them invalid', () => {
  const target = { projectId: 'proj_01JD3Z8K6Q5W0R1S2T3V4X5Y6Z', emailId: 'email_01JD3Z8K6Q5W0R1S2T3V4X5Y6A', recipient: 'ann@example.net' };
  const token = signUnsubscribeToken(TEST_SECRET_KEY, target);
  assert.match(token, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/, 'URL-safe as it is');
  assert.deepEqual(verifyUnsubscribeToken(TEST_SECRET_KEY, token), target);
  for (const bad of tamper(token)) assert.equal(verifyUnsubscribeToken(TEST_SECRET_KEY, bad), undefined, bad);
  assert.equal(verifyUnsubscribeToken('another-secret-key-that-is-long-enough-0123', token), undefined);
});

test('GET shows a confirm page that posts back, and records nothing', async () => {
  const { projectId, token } = await recipientEmail();
  const res = await ctx.call(undefined, `/unsubscribe/${token}`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
  assert.equal(res.headers.get('cache-control'), 'no-store');
  assert.equal(res.headers.get('referrer-policy'), 'no-referrer');
  const body = await res.text();
  assert.match(body, /<form method="post">/);
  assert.match(body, /name="List-Unsubscribe" value="One-Click"/);
  assert.deepEqual(await suppressionsOf(projectId), []);
});

test('one-click POST (RFC 8058) suppresses the token\'s recipient as unsubscribed', async () => {
  const { projectId, emailId, token } = await recipientEmail();
  const res = await ctx.app.request(`/unsubscribe/${token}`, {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click',
  });
  assert.equal(res.status, 200);
  assert.match(await res.text(), /unsubscribed/i);
  assert.deepEqual(await suppressionsOf(projectId), [{ address: 'ann@example.net', reason: 'unsubscribed', emailId }]);
  const again = await ctx.app.request(`/unsubscribe/${token}`, { method: 'POST', body: new URLSearchParams({ 'List-Unsubscribe': 'One-Click' }) });
  assert.equal(again.status, 200, 'repeating it is harmless');
  assert.equal((await suppressionsOf(projectId)).length, 1);
});

test('no token ever suppresses a co-recipient: one naming another address, or one without an address on a shared email, is refused', async () => {
  const tenant = await ctx.tenant();
  const emailId = await insertEmail(ctx.sql, tenant.projectId, { to: ['ann@example.net'], cc: ['cc@example.net'], bcc: ['hidden@example.net'] }, false);
  // An address the email does not name, and a token minted before tokens named their recipient.
  const stranger = signUnsubscribeToken(ctx.config.secretKey, { projectId: tenant.projectId, emailId, recipient: 'someone@example.net' });
  const payload = Buffer.from(JSON.stringify({ p: tenant.projectId, e: emailId })).toString('base64url');
  const { createHmac } = await import('node:crypto');
  const { deriveKey } = await import('../../src/platform/crypto.ts');
  const legacy = `${payload}.${createHmac('sha256', deriveKey(ctx.config.secretKey, 'unsubscribe-tokens')).update(`unsubscribe.v1.${payload}`).digest('base64url')}`;
  assert.deepEqual(verifyUnsubscribeToken(ctx.config.secretKey, legacy), { projectId: tenant.projectId, emailId });
  for (const token of [stranger, legacy]) {
    const res = await ctx.app.request(`/unsubscribe/${token}`, { method: 'POST', body: 'List-Unsubscribe=One-Click' });
    assert.equal(res.status, 400);
  }
  assert.deepEqual(await suppressionsOf(tenant.projectId), []);
  // One naming the hidden recipient suppresses that address alone.
  const hidden = signUnsubscribeToken(ctx.config.secretKey, { projectId: tenant.projectId, emailId, recipient: 'hidden@example.net' });
  assert.equal((await ctx.app.request(`/unsubscribe/${hidden}`, { method: 'POST', body: 'List-Unsubscribe=One-Click' })).status, 200);
  assert.deepEqual((await suppressionsOf(tenant.projectId)).map((r) => r.address), ['hidden@example.net']);
});

test('a tampered token gets a 400 page and nothing is recorded, on GET and POST', async () => {
  const { projectId, token } = await recipientEmail();
  const total = async () => (await ctx.sql`select count(*)::int as n from suppressions`)[0]!.n as number;
  const before = await total();
  for (const bad of tamper(token)) {
    for (const method of ['GET', 'POST']) {
      const res = await ctx.app.request(`/unsubscribe/${encodeURIComponent(bad)}`, { method, body: method === 'POST' ? 'List-Unsubscribe=One-Click' : undefined });
      assert.equal(res.status, 400, `${method} ${bad}`);
      assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
      assert.doesNotMatch(await res.text(), new RegExp(bad.slice(0, 20).replace(/[-]/g, '\\-')), 'the token is not echoed');
    }
  }
  assert.deepEqual(await suppressionsOf(projectId), []);
  assert.equal(await total(), before);
});

test('a genuine token cannot reach an email of another project', async () => {
  const a = await recipientEmail();
  const b = await recipientEmail();
  const crossed = signUnsubscribeToken(ctx.config.secretKey, { projectId: a.projectId, emailId: b.emailId, recipient: 'Ann <Ann@Example.net>' });
  const res = await ctx.app.request(`/unsubscribe/${crossed}`, { method: 'POST', body: 'List-Unsubscribe=One-Click' });
  assert.equal(res.status, 404);
  assert.deepEqual(await suppressionsOf(a.projectId), []);
  assert.deepEqual(await suppressionsOf(b.projectId), []);
});

test('the unsubscribe routes need no API key and stay out of the OpenAPI document', async () => {
  const doc = (await (await ctx.call(undefined, '/openapi.json')).json()) as { paths: Record<string, unknown> };
  assert.ok(Object.keys(doc.paths).length > 0);
  assert.ok(!Object.keys(doc.paths).some((p) => p.includes('unsubscribe')));
});

test('List-Unsubscribe headers carry a working link when PUBLIC_BASE_URL is set, and are absent otherwise', async () => {
  const { projectId } = await ctx.tenant();
  await connectProvider(ctx.sql, ctx.config, { projectId, region: 'us-east-1', accessKeyId: 'AKIDUNSUB', secretAccessKey: 'secret', sendQuota: { maxSendRate: 100, max24HourSend: 50_000 } });
  const log = createLogger('silent');
  const withUrl = emailSendTask({ config: ctx.config, sql: ctx.sql, log });
  const withoutUrl = emailSendTask({ config: { ...ctx.config, publicBaseUrl: undefined }, sql: ctx.sql, log });

  const a = await insertEmail(ctx.sql, projectId, { to: ['reader@example.net'] }, false);
  await withUrl({ email_id: a, project_id: projectId }, noHelpers);
  const rawA = unfolded(fake.requests.at(-1)!.raw);
  const link = /^List-Unsubscribe: <https:\/\/mail\.example\.test\/unsubscribe\/([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)>$/m.exec(rawA);
  assert.ok(link, rawA.slice(0, 800));
  assert.match(rawA, /^List-Unsubscribe-Post: List-Unsubscribe=One-Click$/m);
  assert.deepEqual(verifyUnsubscribeToken(ctx.config.secretKey, link[1]!), { projectId, emailId: a, recipient: 'reader@example.net' });
  const res = await ctx.app.request(`/unsubscribe/${link[1]}`, { method: 'POST', body: 'List-Unsubscribe=One-Click' });
  assert.equal(res.status, 200);
  assert.deepEqual((await suppressionsOf(projectId)).map((s) => s.address), ['reader@example.net']);

  const b = await insertEmail(ctx.sql, projectId, { to: ['other@example.net'] }, false);
  await withoutUrl({ email_id: b, project_id: projectId }, noHelpers);
  const rawB = unfolded(fake.requests.at(-1)!.raw);
  assert.match(rawB, /other@example\.net/);
  assert.doesNotMatch(rawB, /^List-Unsubscribe/im);

  // More than one recipient across to, cc and bcc: no List-Unsubscribe at all.
  for (const fields of [{ to: ['one@example.net', 'two@example.net'] }, { to: ['one@example.net'], cc: ['two@example.net'] }, { to: ['one@example.net'], bcc: ['secret@example.net'] }]) {
    const shared = await insertEmail(ctx.sql, projectId, fields, false);
    await withUrl({ email_id: shared, project_id: projectId }, noHelpers);
    const raw = unfolded(fake.requests.at(-1)!.raw);
    assert.match(raw, /one@example\.net/);
    assert.doesNotMatch(raw, /^List-Unsubscribe/im, JSON.stringify(fields));
  }

  const own = await insertEmail(ctx.sql, projectId, { to: ['own@example.net'], headers: { 'List-Unsubscribe': '<mailto:unsub@example.com>' } }, false);
  await withUrl({ email_id: own, project_id: projectId }, noHelpers);
  const rawOwn = unfolded(fake.requests.at(-1)!.raw);
  assert.match(rawOwn, /^List-Unsubscribe: <mailto:unsub@example\.com>$/m, 'the caller\'s own header is kept');
  assert.equal(rawOwn.match(/^List-Unsubscribe:/gim)?.length, 1);
});
