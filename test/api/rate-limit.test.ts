import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createTestContext } from '../helpers/app.ts';
import { testRedisUrl, testRedisClient, REDIS_SKIP_REASON } from '../helpers/redis.ts';
import { MemoryRateLimiter, RedisRateLimiter } from '../../src/http/rate-limit.ts';
import { createLogger } from '../../src/platform/log.ts';
import { createRedis } from '../../src/platform/redis.ts';

const redisUrl = await testRedisUrl();
const log = createLogger('silent');

test('limit is per project in Redis: a second key gives no extra headroom', { skip: !redisUrl && REDIS_SKIP_REASON }, async () => {
  const redis = await testRedisClient(redisUrl!);
  const limiter = new RedisRateLimiter(redis, log, `mailroom:test:${randomBytes(4).toString('hex')}:`);
  const ctx = await createTestContext({ env: { API_RATE_LIMIT_PER_MINUTE: '5' }, limiter });
  const t = await ctx.tenant('limited');
  const { createApiKey } = await import('../../src/keys/service.ts');
  const second = await createApiKey(ctx.sql, t.projectId, 'second');
  const other = await ctx.tenant('other');

  const statuses: number[] = [];
  for (let i = 0; i < 6; i++) {
    const res = await ctx.call(i % 2 ? second.key : t.key, '/v1/emails');
    statuses.push(res.status);
    assert.equal(res.headers.get('x-ratelimit-limit'), '5');
    assert.equal(res.headers.get('x-ratelimit-remaining'), String(Math.max(0, 4 - i)));
    const reset = Number(res.headers.get('x-ratelimit-reset'));
    assert.ok(Number.isInteger(reset) && reset >= 1 && reset <= 60);
    if (res.status === 429) {
      assert.deepEqual((await res.json()).error.type, 'rate_limit_exceeded');
      assert.equal(res.headers.get('retry-after'), String(reset));
    }
  }
  assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429]);
  assert.equal((await ctx.call(other.key, '/v1/emails')).status, 200, 'another project has its own budget');
});

test('headers are also on 404 answers of authenticated requests', async () => {
  const ctx = await createTestContext({ env: { API_RATE_LIMIT_PER_MINUTE: '100' } });
  const t = await ctx.tenant();
  const res = await ctx.call(t.key, '/v1/emails/email_missing');
  assert.equal(res.status, 404);
  assert.equal(res.headers.get('x-ratelimit-limit'), '100');
  assert.equal(res.headers.get('x-ratelimit-remaining'), '99');
});

test('concurrent requests never over-admit (atomic window)', { skip: !redisUrl && REDIS_SKIP_REASON }, async () => {
  const limiter = new RedisRateLimiter(await testRedisClient(redisUrl!), log, `mailroom:test:${randomBytes(4).toString('hex')}:`);
  const results = await Promise.all(Array.from({ length: 50 }, () => limiter.hit('p', 20)));
  assert.equal(results.filter((r) => r.allowed).length, 20);
});

test('the requests of one turn charge each key once, each at its own place in the window', { skip: !redisUrl && REDIS_SKIP_REASON }, async () => {
  const redis = await testRedisClient(redisUrl!);
  const prefix = `mailroom:test:${randomBytes(4).toString('hex')}:`;
  const limiter = new RedisRateLimiter(redis, log, prefix);
  const scripted = redis as unknown as { mailroomHit: (...args: unknown[]) => Promise<unknown> };
  const original = scripted.mailroomHit.bind(redis);
  let scriptRuns = 0;
  scripted.mailroomHit = (...args) => { scriptRuns++; return original(...args); };

  const results = await Promise.all(Array.from({ length: 30 }, (_, i) => limiter.hit(i % 3 ? 'a' : 'b', 12)));
  assert.equal(scriptRuns, 2, 'one script run per key');
  const a = results.filter((_, i) => i % 3);
  const b = results.filter((_, i) => !(i % 3));
  assert.deepEqual(a.map((r) => r.remaining), [11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
  assert.deepEqual(a.map((r) => r.allowed), [...Array(12).fill(true), ...Array(8).fill(false)]);
  assert.deepEqual(b.map((r) => r.remaining), [11, 10, 9, 8, 7, 6, 5, 4, 3, 2]);
  assert.ok(b.every((r) => r.allowed));
  assert.ok(results.every((r) => r.limit === 12 && r.resetSeconds >= 1 && r.resetSeconds <= 60));
  assert.equal(await redis.get(`${prefix}a`), '20');
  const ttl = await redis.pttl(`${prefix}a`);
  assert.ok(ttl > 0 && ttl <= 60_000, `the window expires: ${ttl}`);

  const later = await limiter.hit('b', 12);
  assert.equal(later.remaining, 1, 'a later turn goes on from the count');
  assert.equal(scriptRuns, 3);
});

test('Redis down: requests are served unlimited and readiness answers 503', async () => {
  // A port nothing listens on stands in for an unreachable Redis.
  const redis = createRedis('redis://127.0.0.1:1', log);
  const limiter = new RedisRateLimiter(redis, log);
  const ctx = await createTestContext({ env: { API_RATE_LIMIT_PER_MINUTE: '1' }, limiter });
  const t = await ctx.tenant();
  try {
    for (let i = 0; i < 3; i++) {
      const res = await ctx.call(t.key, '/v1/emails');
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-ratelimit-limit'), '1');
      assert.ok(Number(res.headers.get('x-ratelimit-remaining')) >= 0);
    }
    assert.ok(limiter.failOpenCount >= 3, 'fail-open is counted');
    const ready = await ctx.call(undefined, '/readyz');
    assert.equal(ready.status, 503);
    assert.deepEqual(await ready.json(), { status: 'not_ready', dependencies: { database: true, cache: false } });
  } finally {
    redis.disconnect();
  }
});

test('readiness with a live Redis is ready', { skip: !redisUrl && REDIS_SKIP_REASON }, async () => {
  const ctx = await createTestContext({ limiter: new RedisRateLimiter(await testRedisClient(redisUrl!), log) });
  const res = await ctx.call(undefined, '/readyz');
  assert.equal(res.status, 200);
  assert.deepEqual((await res.json()).dependencies, { database: true, cache: true });
});

test('database down: readiness answers 503 within its budget', async () => {
  const { createSql } = await import('../../src/platform/db.ts');
  const ctx = await createTestContext();
  const dead = createSql('postgres://postgres@127.0.0.1:1/none', { max: 1 });
  const app = (await import('../../src/http/app.ts')).createApp({ ...ctx.deps, sql: dead, limiter: new MemoryRateLimiter() });
  const started = Date.now();
  const res = await app.request('/readyz');
  assert.equal(res.status, 503);
  assert.deepEqual((await res.json()).dependencies, { database: false, cache: true });
  assert.ok(Date.now() - started < 2500);
  await dead.end({ timeout: 0 });
});
