import type { Context, Hono } from 'hono';
import type { AppEnv } from '../http/context.ts';
import { newId } from '../platform/ids.ts';
import { isMachineAgent, storedUserAgent } from '../events/user-agents.ts';
import { hostKey, verifyTrackingToken, type TrackingKind, type TrackingTarget } from './token.ts';
import { isTrackingDomainOf, trackedLink } from './queries.ts';
import { recordHit } from './record.ts';
import type { Sql } from '../platform/db.ts';

/** A transparent 1×1 GIF, 43 bytes. */
export const PIXEL = Buffer.from('R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==', 'base64');

/**
 * A sent email's links never change, so the click route keeps the last links it looked up in
 * memory, keyed by project, email and position (immutable): a burst of clicks on one message
 * reads its link once. Bounded by entries, each one URL.
 */
const LINK_CACHE_SIZE = 20_000;
const linkCache = new Map<string, string>();

async function linkUrl(sql: Sql, target: TrackingTarget): Promise<string | undefined> {
  const key = `${target.projectId}/${target.emailId}/${target.link}`;
  let url = linkCache.get(key);
  if (url === undefined) {
    url = await trackedLink(sql, target.projectId, target.emailId, target.link);
    if (url === undefined) return undefined;
    if (linkCache.size >= LINK_CACHE_SIZE) linkCache.delete(linkCache.keys().next().value!);
    linkCache.set(key, url);
  }
  return url;
}

/** The host a tracking request came to (as the client asked for it): a token answers only on its own. */
const requestHost = (c: Context<AppEnv>) => c.req.header('host') ?? new URL(c.req.url).host;

/**
 * The token's target when it answers on this host. A link sent before tokens named their host
 * answers on the hosts its project issues links on (PUBLIC_BASE_URL's, its domains' tracking
 * domains), so mail already delivered keeps working after an upgrade and still nowhere else.
 */
async function targetHere(c: Context<AppEnv>, kind: TrackingKind): Promise<TrackingTarget | undefined> {
  const { config, sql } = c.var.deps;
  const host = requestHost(c);
  const target = verifyTrackingToken(config.secretKey, kind, c.req.param('token') ?? '', host);
  if (!target?.hostless) return target;
  const here = hostKey(host);
  const publicHost = config.publicBaseUrl ? hostKey(new URL(config.publicBaseUrl).host) : undefined;
  if (here === publicHost || await isTrackingDomainOf(sql, target.projectId, here)) return target;
  return undefined;
}

const notFound = (c: Context<AppEnv>) => c.body('Not found\n', 404, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });

/**
 * The targets of tracked links and the pixel (§15.2), served under the custom tracking domain or
 * PUBLIC_BASE_URL. Outside /v1: the signed token is the only credential, so they take no key and
 * stay out of the OpenAPI document. Each answers at once and records afterwards; HEAD (which
 * Hono runs through the GET handler) answers alike and records nothing. No client address is
 * read or kept.
 */
export function registerTrackingRoutes(app: Hono<AppEnv>) {
  app.get('/t/c/:token', async (c) => {
    const { sql, log } = c.var.deps;
    const target = await targetHere(c, 'click');
    if (!target) return notFound(c);
    // Only a URL stored for this email at send time: the route is never an open redirect.
    const url = await linkUrl(sql, target);
    if (!url) return notFound(c);
    if (c.req.method === 'GET') {
      const agent = c.req.header('user-agent');
      recordHit(sql, log, {
        id: newId('event'), projectId: target.projectId, emailId: target.emailId, type: 'email.clicked', at: new Date().toISOString(),
        data: { link: url, user_agent: storedUserAgent(agent), machine: isMachineAgent(agent) },
      });
    }
    return c.body(null, 302, { location: url, 'cache-control': 'no-store', 'referrer-policy': 'no-referrer' });
  });

  app.get('/t/o/:token', async (c) => {
    const { sql, log } = c.var.deps;
    const target = await targetHere(c, 'open');
    if (!target) return notFound(c);
    if (c.req.method === 'GET') {
      const agent = c.req.header('user-agent');
      recordHit(sql, log, {
        id: newId('event'), projectId: target.projectId, emailId: target.emailId, type: 'email.opened', at: new Date().toISOString(),
        data: { user_agent: storedUserAgent(agent), machine: isMachineAgent(agent) },
      });
    }
    return c.body(new Uint8Array(PIXEL), 200, { 'content-type': 'image/gif', 'content-length': String(PIXEL.length), 'cache-control': 'no-store' });
  });
}
