import { after } from 'node:test';
import { Redis } from 'ioredis';

let cached: Promise<string | undefined> | undefined;

/**
 * The Redis for tests: REDIS_URL or 127.0.0.1:6379. Undefined (with a printed reason) when none
 * answers, so callers can `skip` rather than fail on a bare machine.
 */
export function testRedisUrl(): Promise<string | undefined> {
  cached ??= (async () => {
    const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 1000, retryStrategy: () => null });
    probe.on('error', () => {});
    try {
      await probe.connect();
      await probe.ping();
      return url;
    } catch {
      process.stdout.write(`# Redis not reachable at ${url}; Redis-backed tests are skipped\n`);
      return undefined;
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
