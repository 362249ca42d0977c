import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { SmtpSession, emailIdOf, message, startTestRelay, testCertificate } from './setup.ts';
import { loadConfig, ConfigError } from '../../src/platform/config.ts';
import { RedisRateLimiter } from '../../src/http/rate-limit.ts';
import { createRedis } from '../../src/platform/redis.ts';
import { createLogger } from '../../src/platform/log.ts';
import { freePort } from '../../bench/support.ts';

// Each relay is started here, at the file's level: the file's end closes them before their
// databases are dropped.
const noTls = await startTestRelay({ env: { RELAY_TLS_CERT: '', RELAY_TLS_KEY: '' } });
const plain = await startTestRelay({ env: { RELAY_ALLOW_PLAINTEXT_AUTH: 'yes' } });
const limited = await startTestRelay({ env: { RELAY_MAX_CONNECTIONS: '2', RELAY_IDLE_TIMEOUT_SECONDS: '1' } });
const limitedBoth = await startTestRelay({ smtps: true, env: { RELAY_MAX_CONNECTIONS: '2' } });
const deadRedis = createRedis(`redis://127.0.0.1:${await freePort()}`, createLogger('silent'));
const failOpen = new RedisRateLimiter(deadRedis, createLogger('silent'));
const redisDown = await startTestRelay({ limiter: failOpen, env: { API_RATE_LIMIT_PER_MINUTE: '1' } });

const good = message({ From: 'app@example.com', To: 'ann@example.net', Subject: 'ok' });
const base = { SECRET_KEY: 'x'.repeat(40), DATABASE_URL: 'postgres://localhost/x', REDIS_URL: 'redis://localhost' };

test('settings: both certificate paths or neither, implicit TLS needs them, the dev defaults, bad values name the variable', async () => {
  assert.throws(() => loadConfig({ ...base, RELAY_SMTP_PORT: '587', RELAY_TLS_CERT: '/c.pem' }), (e: Error) => e instanceof ConfigError && /^RELAY_TLS_KEY: required with RELAY_TLS_CERT/.test(e.message));
  const fails = (env: Record<string, string>, line: RegExp) => assert.throws(() => loadConfig({ ...base, ...env }), (e: Error) => e instanceof ConfigError && line.test(e.message));
  fails({ RELAY_SMTP_PORT: '587', RELAY_SMTPS_PORT: '465' }, /^RELAY_SMTPS_PORT: implicit TLS needs RELAY_TLS_CERT and RELAY_TLS_KEY$/);
  fails({ RELAY_ALLOW_PLAINTEXT_AUTH: 'maybe' }, /^RELAY_ALLOW_PLAINTEXT_AUTH: expected /);
  fails({ RELAY_MAX_CONNECTIONS: '0' }, /^RELAY_MAX_CONNECTIONS: expected /);
  fails({ RELAY_SMTP_PORT: 'smtp' }, /^RELAY_SMTP_PORT: expected /);
  assert.equal(loadConfig(base).relay, undefined, 'off without RELAY_SMTP_PORT');
  const on = loadConfig({ ...base, HOST: '10.0.0.5', RELAY_SMTP_PORT: '587' }).relay!;
  assert.deepEqual({ host: on.host, port: on.port, max: on.maxConnections, idle: on.idleTimeoutMs, plain: on.allowPlaintextAuth }, { host: '10.0.0.5', port: 587, max: 100, idle: 60_000, plain: false });
  const dev = loadConfig({ ...base }, { dev: true, relaySmtpPort: 2587, relayTls: { certFile: 'c', keyFile: 'k' } }).relay!;
  assert.equal(dev.port, 2587);
  assert.deepEqual(dev.tls, { certFile: 'c', keyFile: 'k' });
});

test('production without a certificate: no STARTTLS, AUTH refused with 538; RELAY_ALLOW_PLAINTEXT_AUTH=yes takes it', async () => {
  const t = await noTls.tenant();
  const s = await SmtpSession.open(noTls.port);
  assert.doesNotMatch(await s.command('EHLO client.test'), /STARTTLS/);
  assert.match(await s.auth(t.key), /^538 5\.7\.11 /);
  s.close();
  const p = await plain.tenant();
  const s2 = await SmtpSession.open(plain.port);
  await s2.command('EHLO client.test');
  assert.match(await s2.auth(p.key), /^235 /);
  assert.match(await s2.send('app@example.com', ['ann@example.net'], good), /^250 2\.0\.0 OK queued as /);
  s2.close();
});

test('RELAY_MAX_CONNECTIONS turns the next connection away with 421; an idle one is closed after RELAY_IDLE_TIMEOUT_SECONDS', async () => {
  const ctx = limited;
  const a = await SmtpSession.open(ctx.port);
  const b = await SmtpSession.open(ctx.port);
  assert.match(a.greeting, /^220 /);
  const third = await SmtpSession.open(ctx.port);
  assert.match(third.greeting, /^421 /);
  a.close();
  b.close();
  third.close();
  await sleep(200);
  const idle = await SmtpSession.open(ctx.port);
  assert.match(idle.greeting, /^220 /);
  await idle.command('EHLO client.test');
  const bye = await idle.reply(5000);
  assert.match(bye, /^421 /);
  await sleep(100);
  assert.equal(idle.closed, true);
});

test('RELAY_MAX_CONNECTIONS counts the STARTTLS and the implicit TLS listener together', async () => {
  const ctx = limitedBoth;
  const sessions: SmtpSession[] = [];
  const open = async (port: number, tls: boolean) => {
    const session = await SmtpSession.open(port, { tls });
    sessions.push(session);
    return session.greeting;
  };
  try {
    assert.match(await open(ctx.port, false), /^220 /);
    assert.match(await open(ctx.smtpsPort!, true), /^220 /);
    // Connections are counted from accept (§22.6): past the limit the implicit-TLS port closes the
    // next one before its handshake, since nothing can be said before TLS; the plain port says 421.
    await assert.rejects(SmtpSession.open(ctx.smtpsPort!, { tls: true }));
    assert.match(await open(ctx.port, false), /^421 /);
    for (const s of sessions.splice(0)) s.close();
    await sleep(200);
    assert.match(await open(ctx.smtpsPort!, true), /^220 /, 'a freed place is taken again');
  } finally {
    for (const s of sessions) s.close();
  }
});

test('with Redis unreachable, messages are accepted unlimited', async () => {
  const ctx = redisDown;
  const limiter = failOpen;
  const t = await ctx.tenant();
  const s = await SmtpSession.open(ctx.port);
  await s.startTls();
  assert.match(await s.auth(t.key), /^235 /);
  for (let i = 0; i < 3; i++) assert.ok(emailIdOf(await s.send('app@example.com', ['ann@example.net'], good)));
  assert.ok(limiter.failOpenCount >= 3);
  s.close();
  deadRedis.disconnect();
});

test('a certificate file that cannot be read stops the relay with one line naming the setting', async () => {
  const { certFile } = await testCertificate();
  await assert.rejects(startTestRelay({ env: { RELAY_TLS_CERT: certFile, RELAY_TLS_KEY: '/nonexistent/key.pem' } }), (e: Error) => e instanceof ConfigError && /^RELAY_TLS_CERT\/RELAY_TLS_KEY: cannot read \/nonexistent\/key\.pem \(ENOENT\)/.test(e.message));
});
