import type { Redis } from 'ioredis';
import type { Logger } from '../platform/log.ts';
import { GroupCommit } from '../platform/group-commit.ts';
import { pingRedis } from '../platform/redis.ts';

export type RateDecision = { allowed: boolean; limit: number; remaining: number; resetSeconds: number };

export interface RateLimiter {
  /** Counts one request against `key` in a one-minute window. */
  hit(key: string, limit: number): Promise<RateDecision>;
  /** What readiness reports as `cache`. */
  ready(): Promise<boolean>;
}

const WINDOW_MS = 60_000;

// The increment and the expiry in one script, so concurrent API replicas can't lose the window's
// TTL. ARGV[2] charges several requests at once: the window is new when the count equals it.
const HIT_SCRIPT = `
local n = redis.call('INCRBY', KEYS[1], ARGV[2])
if n == tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
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

type Charge = { key: string; limit: number };

export class RedisRateLimiter implements RateLimiter {
  /** Requests served unlimited because Redis was unreachable; exported for operators. */
  failOpenCount = 0;
  private lastWarnAt = 0;
  /**
   * The requests of one event-loop turn charge each key once, by their number, and each gets the
   * count at its own place in that charge: what one INCR each would have given, for one script
   * run instead of many. Nothing waits for an earlier charge, so a slow Redis costs a request no
   * more than its own command's timeout.
   */
  private readonly charges = new GroupCommit<Charge, RateDecision>((batch) => this.chargeTogether(batch), { maxInFlight: Infinity });

  constructor(private readonly redis: Redis, private readonly log: Logger, private readonly prefix = 'mailroom:rl:') {
    redis.defineCommand('mailroomHit', { numberOfKeys: 1, lua: HIT_SCRIPT });
  }

  hit(key: string, limit: number): Promise<RateDecision> {
    return this.charges.run({ key, limit });
  }

  private async chargeTogether(batch: Charge[]): Promise<RateDecision[]> {
    const perKey = new Map<string, number>();
    for (const { key } of batch) perKey.set(key, (perKey.get(key) ?? 0) + 1);
    const counted = new Map(await Promise.all([...perKey].map(async ([key, n]) => [key, await this.charge(key, n)] as const)));
    const placed = new Map<string, number>();
    return batch.map(({ key, limit }) => {
      const result = counted.get(key);
      // Fail open: an outage of the limiter must not become an outage of sending.
      if (!result) return { allowed: true, limit, remaining: limit, resetSeconds: 60 };
      const place = (placed.get(key) ?? 0) + 1;
      placed.set(key, place);
      return decide(result.count - perKey.get(key)! + place, result.ttlMs, limit);
    });
  }

  /** Adds `n` to the key's window: the count after it and the window's time left, or undefined if Redis failed. */
  private async charge(key: string, n: number): Promise<{ count: number; ttlMs: number } | undefined> {
    try {
      const [count, ttlMs] = await (this.redis as unknown as {
        mailroomHit(key: string, windowMs: number, n: number): Promise<[number, number]>;
      }).mailroomHit(this.prefix + key, WINDOW_MS, n);
      return { count, ttlMs };
    } catch (err) {
      this.failOpenCount += n;
      if (Date.now() - this.lastWarnAt > 10_000) {
        this.lastWarnAt = Date.now();
        this.log.warn({ err: (err as Error).message, failOpenCount: this.failOpenCount }, 'rate limiter unavailable; serving without limits');
      }
      return undefined;
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
