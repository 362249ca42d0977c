import { after } from 'node:test';
import { Redis } from 'ioredis';

let cached: Promise<string | undefined> | undefined;

/** Redis logical databases handed out to test files; 0 stays for the claims themselves. */
const FIRST_DB = 1;
const LAST_DB = 15;
/** Takes a claim whose holder is no longer running (a test process that was killed). */
const TAKE_OVER_DEAD = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('set', KEYS[1], ARGV[2]) end return false`;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * One Redis database for this test file alone, emptied first: rate-limit counters are keyed by
 * client address, and every test client is 127.0.0.1, so files running at once would otherwise
 * spend each other's limits.
 */
async function claimDatabase(probe: Redis, base: string): Promise<string> {
  const me = String(process.pid);
  for (let db = FIRST_DB; db <= LAST_DB; db++) {
    const key = `mailroom:test-db:${db}`;
    let mine = (await probe.set(key, me, 'NX')) === 'OK';
    if (!mine) {
      const holder = await probe.get(key);
      if (holder && !alive(Number(holder))) mine = (await probe.eval(TAKE_OVER_DEAD, 1, key, holder, me)) === 'OK';
    }
    if (!mine) continue;
    const url = new URL(base);
    url.pathname = `/${db}`;
    const client = new Redis(url.toString(), { lazyConnect: true, maxRetriesPerRequest: 1 });
    client.on('error', () => {});
    await client.connect();
    await client.flushdb();
    client.disconnect();
    after(async () => {
      const release = new Redis(base, { lazyConnect: true, maxRetriesPerRequest: 1 });
      release.on('error', () => {});
      try {
        await release.connect();
        await release.eval(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`, 1, key, me);
      } catch { /* the claim is taken over once this process is gone */ } finally {
        release.disconnect();
      }
    });
    return url.toString();
  }
  process.stdout.write('# every test Redis database is claimed; this file shares database 0\n');
  return base;
}

/**
 * The Redis for tests: REDIS_URL or 127.0.0.1:6379, narrowed to a database of this file's own.
 * Undefined (with a printed reason) when none answers, so callers can `skip` rather than fail on
 * a bare machine.
 */
export function testRedisUrl(): Promise<string | undefined> {
  cached ??= (async () => {
    const base = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
    const probe = new Redis(base, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 1000, retryStrategy: () => null });
    probe.on('error', () => {});
    try {
      await probe.connect();
      await probe.ping();
    } catch {
      process.stdout.write(`# Redis not reachable at ${base}; Redis-backed tests are skipped\n`);
      probe.disconnect();
      return undefined;
    }
    try {
      return await claimDatabase(probe, base);
    } finally {
      probe.disconnect();
    }
  })();
  return cached;
}

export const REDIS_SKIP_REASON = 'no Redis at REDIS_URL or 127.0.0.1:6379';

/** A dedicated connected client, closed when the file ends. */
export async function testRedisClient(url: string): Promise<Redis> {
  const client = new Redis(url, { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true });
  client.on('error', () => {});
  after(() => client.disconnect());
  await client.connect();
  return client;
}
