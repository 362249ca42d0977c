import type { Redis } from 'ioredis';
import type { Logger } from '../platform/log.ts';
import { pingRedis } from '../platform/redis.ts';

export type RateDecision = { allowed: boolean; limit: number; remaining: number; resetSeconds: number };

export interface RateLimiter {
  /** Counts one request against `key` in a one-minute window. */
  hit(key: string, limit: number): Promise<RateDecision>;
  /** What readiness reports as `cache`. */
  ready(): Promise<boolean>;
}

const WINDOW_MS = 60_000;

// INCR and the expiry in one script, so concurrent API replicas can't lose the window's TTL.
const HIT_SCRIPT = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {n, ttl}
`;

function decide(count: number, ttlMs: number, limit: number): RateDecision {
  return {
    allowed: count <= limit,
    limit,
    remaining: Math.max(0, limit - count),
    resetSeconds: Math.max(1, Math.ceil(ttlMs / 1000)),
  };
}

export class RedisRateLimiter implements RateLimiter {
  /** Requests served unlimited because Redis was unreachable; exported for operators. */
  failOpenCount = 0;
  private lastWarnAt = 0;

  constructor(private readonly redis: Redis, private readonly log: Logger, private readonly prefix = 'mailroom:rl:') {
    redis.defineCommand('mailroomHit', { numberOfKeys: 1, lua: HIT_SCRIPT });
  }

  async hit(key: string, limit: number): Promise<RateDecision> {
    try {
      const [count, ttl] = (await (this.redis as unknown as {
        mailroomHit(key: string, windowMs: number): Promise<[number, number]>;
      }).mailroomHit(this.prefix + key, WINDOW_MS));
      return decide(count, ttl, limit);
    } catch (err) {
      // Fail open: an outage of the limiter must not become an outage of sending.
      this.failOpenCount++;
      if (Date.now() - this.lastWarnAt > 10_000) {
        this.lastWarnAt = Date.now();
        this.log.warn({ err: (err as Error).message, failOpenCount: this.failOpenCount }, 'rate limiter unavailable; serving without limits');
      }
      return { allowed: true, limit, remaining: limit, resetSeconds: 60 };
    }
  }

  async ready(): Promise<boolean> {
    return pingRedis(this.redis);
  }
}

/** Development without Redis: the same fixed window, in this process only. */
export class MemoryRateLimiter implements RateLimiter {
  private readonly windows = new Map<string, { count: number; resetAt: number }>();

  async hit(key: string, limit: number): Promise<RateDecision> {
    const now = Date.now();
    let w = this.windows.get(key);
    if (!w || w.resetAt <= now) {
      w = { count: 0, resetAt: now + WINDOW_MS };
      this.windows.set(key, w);
      if (this.windows.size > 10_000) this.sweep(now);
    }
    w.count++;
    return decide(w.count, w.resetAt - now, limit);
  }

  async ready(): Promise<boolean> {
    return true;
  }

  private sweep(now: number) {
    for (const [k, w] of this.windows) if (w.resetAt <= now) this.windows.delete(k);
  }
}
