import type { MiddlewareHandler } from 'hono';
import { safeEqual } from '../platform/crypto.ts';
import { findActiveKeyByHash, touchKey } from '../keys/queries.ts';
import { hashApiKey } from '../keys/service.ts';
import { ApiError } from './errors.ts';
import { clientIp } from './client-ip.ts';
import type { AppEnv } from './context.ts';

const INVALID = 'Invalid or missing API key.';
const FAILED_AUTH_PER_MINUTE = 60;
const KEY_SHAPE = /^sk_[A-Za-z0-9_-]{43}$/;

/** Parses `Authorization: Bearer sk_…`; anything else is treated exactly like a wrong key. */
function bearerKey(header: string | undefined): string | undefined {
  const match = header?.match(/^Bearer\s+(\S+)\s*$/i);
  return match && KEY_SHAPE.test(match[1]!) ? match[1] : undefined;
}

export function rateLimitHeaders(limit: number, remaining: number, resetSeconds: number): Record<string, string> {
  return {
    'X-RateLimit-Limit': String(limit),
    'X-RateLimit-Remaining': String(remaining),
    'X-RateLimit-Reset': String(resetSeconds),
  };
}

/**
 * Authenticates the key, then charges the project's rate limit. Failed attempts are charged to
 * the client address instead, so guessing keys is slow and can't exhaust a project's budget.
 */
export function requireApiKey(): MiddlewareHandler<AppEnv> {
  const lastTouched = new Map<string, number>();
  return async (c, next) => {
    const { sql, limiter, config } = c.var.deps;
    const key = bearerKey(c.req.header('authorization'));
    const presentedHash = key ? hashApiKey(key) : undefined;
    const match = presentedHash ? await findActiveKeyByHash(sql, presentedHash) : undefined;
    if (!match || !presentedHash || !safeEqual(match.keyHash, presentedHash)) {
      const ip = clientIp(c, config.trustProxy);
      const decision = await limiter.hit(`authfail:${ip}`, FAILED_AUTH_PER_MINUTE);
      if (!decision.allowed) {
        throw new ApiError('rate_limit_exceeded', 'Too many failed authentication attempts. Try again later.', {
          'Retry-After': String(decision.resetSeconds),
        });
      }
      throw new ApiError('authentication_failed', INVALID);
    }

    const decision = await limiter.hit(`project:${match.projectId}`, config.apiRateLimitPerMinute);
    const headers = rateLimitHeaders(decision.limit, decision.remaining, decision.resetSeconds);
    if (!decision.allowed) {
      throw new ApiError('rate_limit_exceeded', 'Rate limit exceeded for this project.', {
        ...headers,
        'Retry-After': String(decision.resetSeconds),
      });
    }

    // Skip the UPDATE entirely when this process wrote it within the minute; the SQL guard
    // covers the other replicas.
    const now = Date.now();
    if ((lastTouched.get(match.id) ?? 0) < now - 60_000) {
      lastTouched.set(match.id, now);
      if (lastTouched.size > 10_000) lastTouched.clear();
      await touchKey(sql, match.projectId, match.id);
    }

    c.set('projectId', match.projectId);
    c.set('keyId', match.id);
    await next();
    for (const [name, value] of Object.entries(headers)) c.res.headers.set(name, value);
  };
}
