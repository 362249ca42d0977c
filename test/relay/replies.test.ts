import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SmtpSession, emailIdOf, message, startTestRelay } from './setup.ts';
import { MemoryRateLimiter } from '../../src/http/rate-limit.ts';

// Exact replies over a raw socket, in production mode (NODE_ENV unset).
const ctx = await startTestRelay({ env: { API_RATE_LIMIT_PER_MINUTE: '1000' } });
const alpha = await ctx.tenant('alpha');
const msg = (extra: Record<string, string> = {}) =>
  message({ From: 'App <app@example.com>', To: 'ann@example.net', Subject: 'Hello', ...extra });

test('EHLO advertises STARTTLS, AUTH PLAIN LOGIN and SIZE as EMAIL_MAX_MESSAGE_BYTES', async () => {
  const s = await SmtpSession.open(ctx.port);
  const ehlo = await s.command('EHLO client.test');
  assert.match(ehlo, /STARTTLS/);
  assert.match(ehlo, /SIZE 10485760/);
  assert.match(ehlo, /ENHANCEDSTATUSCODES/);
  await s.startTls();
  const after = await s.command('EHLO client.test');
  assert.match(after, /AUTH PLAIN LOGIN/);
  s.close();
});

test('AUTH before TLS answers 538 5.7.11 in production; MAIL before AUTH 530 5.7.0', async () => {
  const s = await SmtpSession.open(ctx.port);
  await s.command('EHLO client.test');
  assert.match(await s.auth(alpha.key), /^538 5\.7\.11 /);
  assert.match(await s.command('AUTH LOGIN'), /^538 5\.7\.11 /);
  assert.match(await s.command('MAIL FROM:<app@example.com>'), /^530 5\.7\.0 /);
  s.close();
});

test('a wrong key answers 535 5.7.8; a good key after STARTTLS 235 and a message 250 2.0.0 OK queued as <id>', async () => {
  const s = await SmtpSession.open(ctx.port);
  await s.startTls();
  assert.match(await s.auth(`sk_${'A'.repeat(43)}`), /^535 5\.7\.8 /);
  assert.match(await s.auth(alpha.key), /^235 /);
  const reply = await s.send('app@example.com', ['ann@example.net'], msg());
  assert.match(reply, /^250 2\.0\.0 OK queued as email_[0-9A-Z]{26}$/);
  const id = emailIdOf(reply)!;
  const [row] = await ctx.sql`select status, source, project_id from emails where id = ${id}`;
  assert.deepEqual({ ...row }, { status: 'queued', source: 'smtp', projectId: alpha.projectId });
  s.close();
});
