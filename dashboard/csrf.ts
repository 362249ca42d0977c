import type { Context, MiddlewareHandler } from 'hono';
import { getCookie, setCookie } from 'hono/cookie';
import { isHttps } from '../src/http/client-ip.ts';
import { hmacSha256Hex, randomBase64url, safeEqual } from '../src/platform/crypto.ts';
import type { DashEnv } from './env.ts';
import { cookieOptions } from './session.ts';

/**
 * Every form carries `_csrf`, an HMAC of a per-session secret. Before sign-in (the login and
 * signup forms) the secret lives in its own cookie and the form must echo its HMAC back
 * (double submit). A POST from another origin is refused outright.
 */

export const CSRF_FIELD = '_csrf';
const PRE_SESSION_COOKIE = 'mailroom_csrf';

function tokenFor(secret: string): string {
  return hmacSha256Hex(secret, 'mailroom-dashboard-form');
}

/** This request's own origin, as the browser sees it (https behind a trusted proxy). */
export function expectedOrigin(c: Context<DashEnv>): string {
  const url = new URL(c.req.url);
  const scheme = isHttps(c, c.var.deps.config.trustProxy) ? 'https:' : url.protocol;
  return `${scheme}//${url.host}`;
}

/** Sets c.var.csrf for the page being rendered; issues the pre-session cookie when needed. */
export const provideCsrf: MiddlewareHandler<DashEnv> = async (c, next) => {
  let secret = c.var.session?.csrfSecret ?? getCookie(c, PRE_SESSION_COOKIE);
  if (!secret || secret.length > 100) {
    secret = randomBase64url(32);
    setCookie(c, PRE_SESSION_COOKIE, secret, cookieOptions(c, 86_400));
  }
  c.set('csrf', tokenFor(secret));
  await next();
};

/** Whether this POST may proceed: same origin (when the browser says) and a matching token. */
export async function csrfValid(c: Context<DashEnv>): Promise<boolean> {
  const origin = c.req.header('origin');
  if (origin !== undefined && origin !== expectedOrigin(c)) return false;
  const body = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
  const sent = body[CSRF_FIELD];
  return typeof sent === 'string' && safeEqual(sent, c.var.csrf);
}

/**
 * The same check for a form whose body is streamed rather than read first (a contact import's
 * CSV): the token rides in the action's query string, so checking it reads no byte of the body.
 */
export function csrfValidInQuery(c: Context<DashEnv>): boolean {
  const origin = c.req.header('origin');
  if (origin !== undefined && origin !== expectedOrigin(c)) return false;
  const sent = c.req.query(CSRF_FIELD);
  return typeof sent === 'string' && safeEqual(sent, c.var.csrf);
}
