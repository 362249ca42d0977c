import { Redis } from 'ioredis';
import type { Logger } from './log.ts';

/**
 * Commands fail fast while Redis is down (no offline queue, one retry) so the rate limiter can
 * fail open immediately instead of stalling requests; the client keeps reconnecting underneath.
 * A Redis that accepts connections but stops answering costs a request at most 500 ms.
 * Commands issued in the same tick share one write (auto-pipelining).
 */
export function createRedis(url: string, log: Logger): Redis {
  const redis = new Redis(url, {
    lazyConnect: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 1000,
    commandTimeout: 500,
    enableAutoPipelining: true,
    retryStrategy: (times) => Math.min(times * 200, 2000),
  });
  let down = false;
  redis.on('error', (err) => {
    if (!down) log.warn({ err: err.message }, 'redis unavailable');
    down = true;
  });
  redis.on('ready', () => {
    if (down) log.info('redis reconnected');
    down = false;
  });
  return redis;
}

export async function pingRedis(redis: Redis, timeoutMs = 1000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const pong = await Promise.race([
      redis.ping(),
      new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error('timeout')), timeoutMs); }),
    ]);
    return pong === 'PONG';
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
