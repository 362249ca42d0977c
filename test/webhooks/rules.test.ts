import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { backoffMs, decideOutcome, MAX_ATTEMPTS, retryAfterMs } from '../../src/webhooks/outcome.ts';
import { normaliseTransportError } from '../../src/webhooks/errors.ts';
import { signWebhook } from '../../src/webhooks/sign.ts';
import { generateSigningSecret, openSecret, reencodeLegacySecrets, sealSecret } from '../../src/webhooks/secret.ts';
import { decrypt, deriveKey } from '../../src/platform/crypto.ts';
import type { AttemptResult } from '../../src/webhooks/transport.ts';

const answer = (status: number | null, extra: Partial<AttemptResult> = {}): AttemptResult =>
  ({ responseStatus: status, responseBody: null, retryAfter: null, error: status === null ? 'connection_refused' : null, ...extra });

test('backoff is 5 s × 2^k within ±30%: 10, 20, 40, 80, 160 s', () => {
  [10, 20, 40, 80, 160].forEach((seconds, i) => {
    const k = i + 1;
    assert.equal(backoffMs(5000, k, () => 0.5), seconds * 1000);
    assert.equal(backoffMs(5000, k, () => 0), seconds * 700);
    assert.equal(backoffMs(5000, k, () => 1), seconds * 1300);
  });
  // Six attempts take about five minutes at the default base.
  const total = [1, 2, 3, 4, 5].reduce((sum, k) => sum + backoffMs(5000, k, () => 0.5), 0);
  assert.equal(total, 310_000);
});

test('Retry-After is read as seconds or an HTTP date and capped at 160 s', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  assert.equal(retryAfterMs('7', now), 7000);
  assert.equal(retryAfterMs('100000', now), 160_000);
  assert.equal(retryAfterMs(new Date(now + 30_000).toUTCString(), now), 30_000);
  assert.equal(retryAfterMs('Wed, 31 Dec 2025 00:00:00 GMT', now), 0);
  assert.equal(retryAfterMs('soon', now), undefined);
  assert.equal(retryAfterMs(null, now), undefined);
});

test('retry classes: 2xx delivered; 5xx, 429 and network failures retried; 3xx and other 4xx final', () => {
  const now = 1_000_000;
  assert.deepEqual(decideOutcome(answer(204), 1, 5000, now), { status: 'delivered', error: null });
  for (const status of [500, 502, 503, 429]) assert.equal(decideOutcome(answer(status), 1, 5000, now).status, 'pending', String(status));
  for (const error of ['timeout', 'connection_refused', 'connection_reset', 'dns_failure', 'tls_error']) {
    assert.equal(decideOutcome(answer(null, { error }), 1, 5000, now).status, 'pending', error);
  }
  assert.deepEqual(decideOutcome(answer(301), 1, 5000, now), { status: 'failed', error: 'redirect_not_followed' });
  for (const status of [400, 401, 404, 410, 422]) assert.deepEqual(decideOutcome(answer(status), 1, 5000, now), { status: 'failed', error: 'http_error' });
  assert.deepEqual(decideOutcome(answer(null, { error: 'destination_blocked' }), 1, 5000, now), { status: 'failed', error: 'destination_blocked' });
  assert.deepEqual(decideOutcome(answer(500), MAX_ATTEMPTS, 5000, now), { status: 'failed', error: 'http_error' });
  const retry = decideOutcome(answer(503, { retryAfter: '120' }), 1, 5000, now);
  assert.equal(retry.status === 'pending' && retry.runAt.getTime(), now + 120_000);
  const ignored = decideOutcome(answer(500, { retryAfter: '120' }), 1, 5000, now);
  assert.ok(ignored.status === 'pending' && ignored.runAt.getTime() <= now + 13_000, 'Retry-After only counts on 429 and 503');
});

test('transport errors are reduced to a word that carries no address', () => {
  const cases: Array<[unknown, string]> = [
    [Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:443'), { code: 'ECONNREFUSED' }), 'connection_refused'],
    [new AggregateError([Object.assign(new Error('x'), { code: 'ECONNREFUSED' })], 'all failed'), 'connection_refused'],
    [Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }), 'connection_reset'],
    [Object.assign(new Error('getaddrinfo ENOTFOUND hook.example'), { code: 'ENOTFOUND' }), 'dns_failure'],
    [Object.assign(new Error('self-signed'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' }), 'tls_error'],
    [Object.assign(new Error('Hostname/IP does not match'), { code: 'ERR_TLS_CERT_ALTNAME_INVALID' }), 'tls_error'],
    [Object.assign(new Error('Headers Timeout Error'), { code: 'UND_ERR_HEADERS_TIMEOUT' }), 'timeout'],
    [new TypeError('fetch failed', { cause: Object.assign(new Error('x'), { code: 'ECONNRESET' }) }), 'connection_reset'],
    [new Error('something else entirely at https://hook.example/'), 'connection_failed'],
  ];
  for (const [err, word] of cases) assert.equal(normaliseTransportError(err), word);
  assert.equal(normaliseTransportError(new Error('x'), AbortSignal.abort()), 'timeout');
});

test('the signature is v1= + hex HMAC-SHA256 of "<ts>." + body keyed by the whole secret', () => {
  const secret = 'whsec_abc';
  const body = '{"id":"evt_1","data":{"name":"Zoë"}}';
  const expected = createHmac('sha256', Buffer.from(secret, 'utf8')).update(`1700000000.${body}`, 'utf8').digest('hex');
  assert.equal(signWebhook(secret, 1700000000, body), `v1=${expected}`);
  assert.equal(signWebhook(secret, 1700000000, Buffer.from(body)), `v1=${expected}`);
});

test('signing secrets are whsec_ + 32 random bytes in padded base64 and are stored sealed', () => {
  const secret = generateSigningSecret();
  assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
  assert.equal(Buffer.from(secret.slice(6), 'base64').length, 32);
  assert.notEqual(generateSigningSecret(), secret);
  const config = { secretKey: 'k'.repeat(40) };
  const sealed = sealSecret(config, secret);
  assert.ok(!sealed.includes(Buffer.from(secret.slice(6))), 'the stored bytes do not contain the secret');
  assert.equal(openSecret(config, sealed), secret);
  assert.throws(() => openSecret({ secretKey: 'j'.repeat(40) }, sealed), 'another SECRET_KEY cannot open it');
});

test('secrets in the old base64url spelling are rewritten to the standard one, same bytes', async () => {
  const { createTestContext } = await import('../helpers/app.ts');
  const ctx = await createTestContext();
  const { projectId } = await ctx.tenant();
  const bytes = Buffer.from('0123456789abcdef0123456789abcdef');
  const legacy = `whsec_${bytes.toString('base64url')}`;
  const id = 'wh_01ARZ3NDEKTSV4RRFFQ69G5FAV';
  await ctx.sql`insert into webhook_endpoints (id, project_id, url, secret_encrypted) values (${id}, ${projectId}, 'https://hooks.example/x', ${sealSecret(ctx.config, legacy)})`;
  assert.equal(openSecret(ctx.config, (await ctx.sql`select secret_encrypted from webhook_endpoints where id = ${id}`)[0]!.secretEncrypted), `whsec_${bytes.toString('base64')}`, 'read in the standard spelling at once');
  assert.equal(await reencodeLegacySecrets(ctx.sql, ctx.config), 1);
  const [row] = await ctx.sql`select secret_encrypted from webhook_endpoints where id = ${id}`;
  assert.equal(decrypt(deriveKey(ctx.config.secretKey, 'webhook-secrets'), row!.secretEncrypted), `whsec_${bytes.toString('base64')}`);
  assert.equal(await reencodeLegacySecrets(ctx.sql, ctx.config), 0, 'once');
});
