import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, EXAMPLE_SECRET_KEY, loadConfig } from '../../src/platform/config.ts';
import { spawnEntry } from '../helpers/process.ts';

const BASE = { DATABASE_URL: 'postgres://u@h/db', REDIS_URL: 'redis://h:6379', SECRET_KEY: 'x'.repeat(32) };

function refusal(env: Record<string, string>, defaults = {}) {
  try {
    loadConfig(env, defaults);
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return err.message;
  }
  assert.fail(`accepted ${JSON.stringify(env)}`);
}

test('defaults match the contract', () => {
  const c = loadConfig(BASE);
  assert.equal(c.port, 3000);
  assert.equal(c.host, '0.0.0.0');
  assert.equal(c.development, false);
  assert.equal(c.apiRateLimitPerMinute, 600);
  assert.equal(c.emailMaxMessageBytes, 10485760);
  assert.equal(c.eventIngestion, 'queue');
  assert.equal(c.migrateOnStart, false);
  assert.equal(c.sinkSmtpHost, '127.0.0.1');
  assert.equal(c.sinkSmtpPort, 1025);
  assert.equal(c.sinkMaxMessages, 5000);
  assert.equal(c.workerConcurrency, 8);
  assert.equal(c.logLevel, 'info');
  assert.equal(c.trustProxy, false);
  assert.deepEqual(c.webhookAllowedCidrs, []);
});

test('only NODE_ENV=development turns on development mode', () => {
  assert.equal(loadConfig({ ...BASE, NODE_ENV: 'development' }).development, true);
  assert.equal(loadConfig({ ...BASE, NODE_ENV: 'production' }).development, false);
  assert.equal(loadConfig({ ...BASE, NODE_ENV: 'dev' }).development, false);
  assert.equal(loadConfig({ ...BASE, NODE_ENV: 'development' }).host, '127.0.0.1');
});

test('MIGRATE_ON_START accepts exactly the listed values, any case', () => {
  for (const yes of ['yes', 'TRUE', '1', 'On']) assert.equal(loadConfig({ ...BASE, MIGRATE_ON_START: yes }).migrateOnStart, true, yes);
  for (const no of ['', 'no', 'FALSE', '0', 'off']) assert.equal(loadConfig({ ...BASE, MIGRATE_ON_START: no }).migrateOnStart, false, no);
  assert.match(refusal({ ...BASE, MIGRATE_ON_START: 'maybe' }), /^MIGRATE_ON_START: /);
});

test('TRUST_PROXY and WEBHOOK_ALLOWED_CIDRS parse CIDR lists', () => {
  assert.equal(loadConfig({ ...BASE, TRUST_PROXY: 'true' }).trustProxy, true);
  assert.deepEqual(loadConfig({ ...BASE, TRUST_PROXY: '10.0.0.0/8, fd00::/8' }).trustProxy, ['10.0.0.0/8', 'fd00::/8']);
  assert.deepEqual(loadConfig({ ...BASE, WEBHOOK_ALLOWED_CIDRS: '10.1.0.0/16' }).webhookAllowedCidrs, ['10.1.0.0/16']);
});

test('each bad setting is refused with one line naming it', () => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ ...BASE, DATABASE_URL: '' }, /^DATABASE_URL: required/],
    [{ ...BASE, DATABASE_URL: 'mysql://x' }, /^DATABASE_URL: /],
    [{ ...BASE, REDIS_URL: '' }, /^REDIS_URL: required/],
    [{ ...BASE, REDIS_URL: 'http://x' }, /^REDIS_URL: /],
    [{ ...BASE, SECRET_KEY: '' }, /^SECRET_KEY: required/],
    [{ ...BASE, SECRET_KEY: 'short' }, /^SECRET_KEY: .*32 characters/],
    [{ ...BASE, SECRET_KEY: EXAMPLE_SECRET_KEY }, /^SECRET_KEY: .*\.env\.example/],
    [{ ...BASE, EVENT_INGESTION: 'sns' }, /^EVENT_INGESTION: .*queue.*https/],
    [{ ...BASE, PORT: '70000' }, /^PORT: /],
    [{ ...BASE, PORT: 'abc' }, /^PORT: /],
    [{ ...BASE, API_RATE_LIMIT_PER_MINUTE: '0' }, /^API_RATE_LIMIT_PER_MINUTE: /],
    [{ ...BASE, EMAIL_MAX_MESSAGE_BYTES: '-5' }, /^EMAIL_MAX_MESSAGE_BYTES: /],
    [{ ...BASE, WORKER_CONCURRENCY: '0' }, /^WORKER_CONCURRENCY: /],
    [{ ...BASE, SINK_MAX_MESSAGES: 'lots' }, /^SINK_MAX_MESSAGES: /],
    [{ ...BASE, LOG_LEVEL: 'loud' }, /^LOG_LEVEL: /],
    [{ ...BASE, TRUST_PROXY: 'yes please' }, /^TRUST_PROXY: /],
    [{ ...BASE, WEBHOOK_ALLOWED_CIDRS: '10.0.0.0/33' }, /^WEBHOOK_ALLOWED_CIDRS: /],
    [{ ...BASE, PUBLIC_BASE_URL: 'ftp://x' }, /^PUBLIC_BASE_URL: /],
    [{ ...BASE, EVENT_INGESTION: 'https' }, /^PUBLIC_BASE_URL: required when EVENT_INGESTION=https/],
  ];
  for (const [env, pattern] of cases) {
    const message = refusal(env);
    assert.match(message, pattern);
    assert.ok(!message.includes('\n'), 'one line');
  }
});

test('dev mode supplies its own database, secret and limiter', () => {
  const c = loadConfig({}, { dev: true, databaseUrl: 'postgres://x/y', secretKey: 'y'.repeat(40) });
  assert.equal(c.development, true);
  assert.equal(c.redisUrl, undefined);
});

test('npm start refuses to boot without settings: one line on stderr, no stack, exit 1', async () => {
  for (const [env, pattern] of [
    [{}, /^mailroom: DATABASE_URL: required/],
    [{ DATABASE_URL: 'postgres://u@127.0.0.1/x' }, /^mailroom: REDIS_URL: required/],
    [{ ...BASE, SECRET_KEY: EXAMPLE_SECRET_KEY }, /^mailroom: SECRET_KEY: /],
    [{ ...BASE, EVENT_INGESTION: 'carrier-pigeon' }, /^mailroom: EVENT_INGESTION: /],
  ] as const) {
    const p = spawnEntry('src/main.ts', env);
    assert.equal(await p.exited, 1);
    const lines = p.stderr().trim().split('\n');
    assert.equal(lines.length, 1, p.stderr());
    assert.match(lines[0]!, pattern);
    assert.doesNotMatch(p.stderr(), /\n\s+at /);
  }
});
