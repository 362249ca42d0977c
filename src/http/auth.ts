import type { MiddlewareHandler } from 'hono';
import { looksLikeApiKey, verifyApiKey, type AuthenticatedKey } from '../keys/authenticate.ts';
import { ApiError } from './errors.ts';
import { attemptSource, clientIp } from './client-ip.ts';
import type { AppEnv } from './context.ts';
import type { RateLimiter } from './rate-limit.ts';
import { actingAs } from '../audit/actor.ts';

const INVALID = 'Invalid or missing API key.';

/** In-process requests have no peer address; the log says null rather than "unknown". */
export const auditIp = (ip: string) => (ip === 'unknown' ? null : ip);

/** What a `sending` key may do: send, batch, reschedule and cancel. Everything else is `full` only. */
const SENDING_ROUTES: Array<[string, RegExp]> = [
  ['POST', /^\/(v1|resend)\/emails\/?$/],
  ['POST', /^\/(v1|resend)\/emails\/batch\/?$/],
  ['PATCH', /^\/(v1|resend)\/emails\/[^/]+\/?$/],
  ['POST', /^\/(v1|resend)\/emails\/[^/]+\/cancel\/?$/],
];

export function sendingKeyMay(method: string, path: string): boolean {
  return SENDING_ROUTES.some(([m, pattern]) => m === method && pattern.test(path));
}
const FAILED_AUTH_PER_MINUTE = 60;

/**
 * Charges one failed authentication to the client's address: the one limit on key guessing,
 * shared by the API and the SMTP relay. `allowed` false means the address is over it.
 */
export function chargeFailedAuth(limiter: RateLimiter, clientAddress: string) {
  return limiter.hit(`authfail:${attemptSource(clientAddress)}`, FAILED_AUTH_PER_MINUTE);
}

/** Parses `Authorization: Bearer sk_…`; anything else is treated exactly like a wrong key. */
function bearerKey(header: string | undefined): string | undefined {
  const match = header?.match(/^Bearer\s+(\S+)\s*$/i);
  return match && looksLikeApiKey(match[1]) ? match[1] : undefined;
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
export function requireApiKey(recordUse: (key: AuthenticatedKey) => Promise<void>): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const { sql, limiter, config } = c.var.deps;
    const match = await verifyApiKey(sql, bearerKey(c.req.header('authorization')));
    if (!match) {
      const ip = clientIp(c, config.trustProxy);
      const decision = await chargeFailedAuth(limiter, ip);
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

    await recordUse(match);
    if (match.permission === 'sending' && !sendingKeyMay(c.req.method, c.req.path)) {
      throw new ApiError('permission_denied', 'This key may only send, batch, reschedule and cancel emails.', headers);
    }

    c.set('projectId', match.projectId);
    c.set('keyId', match.id);
    c.set('keyPermission', match.permission);
    // Changes this request makes are recorded as the key's (src/audit).
    await actingAs({ type: 'api_key', id: match.id, label: match.name, ip: auditIp(clientIp(c, config.trustProxy)) }, next);
    for (const [name, value] of Object.entries(headers)) c.res.headers.set(name, value);
  };
}
