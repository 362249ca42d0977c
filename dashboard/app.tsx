import { Hono, type MiddlewareHandler } from 'hono';
import { getProject } from '../src/projects/service.ts';
import { ServiceError } from '../src/platform/errors.ts';
import { csrfValid, csrfValidInQuery, provideCsrf } from './csrf.ts';
import { BASE, type DashEnv } from './env.ts';
import { errorPage } from './render.tsx';
import { isWellFormedId } from '../src/platform/ids.ts';
import { registerAuthRoutes } from './routes/auth.tsx';
import { registerProjectRoutes } from './routes/projects.tsx';
import { registerKeyRoutes } from './routes/keys.tsx';
import { registerWebhookRoutes } from './routes/webhooks.tsx';
import { registerDomainRoutes } from './routes/domains.tsx';
import { registerEmailRoutes } from './routes/emails.tsx';
import { registerInboxRoutes } from './routes/inbox.tsx';
import { registerReceivedRoutes } from './routes/received.tsx';
import { registerOverviewRoutes } from './routes/overview.tsx';
import { registerSuppressionRoutes } from './routes/suppressions.tsx';
import { registerTemplateRoutes } from './routes/templates.tsx';
import { registerContactRoutes } from './routes/contacts.tsx';
import { registerImportRoutes, STREAMED_UPLOAD } from './routes/imports.tsx';
import { registerBroadcastRoutes } from './routes/broadcasts.tsx';
import { registerAssetRoutes } from './routes/assets.ts';
import { registerAuditRoutes } from './routes/audit.tsx';
import { currentSession } from './session.ts';
import { authorize } from './authorize.ts';
import { registerTeamRoutes } from './routes/team.tsx';
import { registerInvitationRoutes } from './routes/invitations.tsx';
import { registerOidcRoutes } from './routes/oidc.tsx';
import { readBoundedBody } from '../src/http/body.ts';
import { ApiError, ValidationError } from '../src/http/errors.ts';
import { actingAs } from '../src/audit/actor.ts';
import { auditIp } from '../src/http/auth.ts';
import { clientIp } from '../src/http/client-ip.ts';

/**
 * Pages may load only their own styles, same-origin frames and the dashboard's own script files,
 * never an inline script, so markup that slipped through could run nothing. Nothing may frame
 * them. connect-src is the live inbox's event stream.
 */
export const DASHBOARD_CSP =
  "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; img-src 'self' data:; frame-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

const securityHeaders: MiddlewareHandler<DashEnv> = async (c, next) => {
  await next();
  // A route that set its own policy (the caught-HTML frame) keeps it.
  if (!c.res.headers.has('content-security-policy')) {
    c.header('Content-Security-Policy', DASHBOARD_CSP);
    c.header('X-Frame-Options', 'DENY');
  }
  c.header('X-Content-Type-Options', 'nosniff');
  // same-origin, not no-referrer: under no-referrer browsers send `Origin: null` on form posts.
  c.header('Referrer-Policy', 'same-origin');
  c.header('Cache-Control', 'no-store');
};

/** Forms are small; anything larger is refused before a session or CSRF token is looked at. */
export const DASHBOARD_MAX_BODY_BYTES = 64 * 1024;

/**
 * Reads every request body first, at most 64 KiB: a larger Content-Length is refused unread, and
 * a chunked body is abandoned the moment it passes the limit. What was read is handed on.
 */
const boundedBody: MiddlewareHandler<DashEnv> = async (c, next) => {
  if (c.req.method === 'GET' || c.req.method === 'HEAD') return next();
  // A contact import's CSV is streamed by its own bounded reader (CONTACT_IMPORT_MAX_BYTES), after the checks.
  if (c.req.method === 'POST' && STREAMED_UPLOAD.test(c.req.path)) return next();
  let bytes: Buffer;
  try {
    bytes = await readBoundedBody(c, DASHBOARD_MAX_BODY_BYTES);
  } catch (err) {
    if (err instanceof ApiError) return errorPage(c, 413, 'Too large', 'The form was larger than the dashboard accepts.');
    return errorPage(c, 400, 'Bad request', 'The form could not be read.');
  }
  c.req.raw = new Request(c.req.raw, { body: new Uint8Array(bytes) });
  await next();
};

const loadSession: MiddlewareHandler<DashEnv> = async (c, next) => {
  const session = await currentSession(c);
  if (session) {
    c.set('session', session);
    c.set('member', { id: session.memberId, email: session.email, role: session.role });
  }
  await next();
};

const checkCsrf: MiddlewareHandler<DashEnv> = async (c, next) => {
  const streamed = c.req.method === 'POST' && STREAMED_UPLOAD.test(c.req.path);
  if (c.req.method !== 'GET' && c.req.method !== 'HEAD' && !(streamed ? csrfValidInQuery(c) : await csrfValid(c))) {
    return errorPage(c, 403, 'Forbidden', 'The form was stale or did not come from this dashboard. Reload the page and try again.');
  }
  await next();
};

const requireLogin: MiddlewareHandler<DashEnv> = async (c, next) => {
  if (!c.var.session) return c.redirect(`${BASE}/login`, 303);
  await next();
};

/** Changes made from here on are recorded as the signed-in person's (src/audit). */
const auditActor: MiddlewareHandler<DashEnv> = (c, next) => {
  const member = c.var.member!;
  return actingAs({ type: 'member', id: member.id, label: member.email, ip: auditIp(clientIp(c, c.var.deps.config.trustProxy)) }, next);
};

const loadProject: MiddlewareHandler<DashEnv> = async (c, next) => {
  const project = isWellFormedId('project', c.req.param('projectId') ?? '')
    ? await getProject(c.var.deps.sql, c.req.param('projectId')!)
    : undefined;
  if (!project) return errorPage(c, 404, 'Not found', 'There is no such project.');
  c.set('project', project);
  await next();
};

/** The team's dashboard, mounted at /dashboard by the HTTP app. */
export function createDashboard() {
  const app = new Hono<DashEnv>();
  app.use('*', securityHeaders, boundedBody, loadSession, provideCsrf, checkCsrf);
  registerAuthRoutes(app);
  registerAssetRoutes(app);
  registerInvitationRoutes(app);
  registerOidcRoutes(app);
  app.use('*', requireLogin, authorize, auditActor);
  registerProjectRoutes(app);
  registerTeamRoutes(app);
  registerAuditRoutes(app);
  app.use('/projects/:projectId', loadProject);
  app.use('/projects/:projectId/*', loadProject);
  registerOverviewRoutes(app);
  registerEmailRoutes(app);
  registerInboxRoutes(app);
  registerReceivedRoutes(app);
  registerSuppressionRoutes(app);
  registerTemplateRoutes(app);
  registerContactRoutes(app);
  registerImportRoutes(app);
  registerBroadcastRoutes(app);
  registerWebhookRoutes(app);
  registerDomainRoutes(app);
  registerKeyRoutes(app);
  app.all('*', (c) => errorPage(c, 404, 'Not found', 'There is no such page.'));

  app.onError((err, c) => {
    // Service messages are written for the operator; not_found ones come from ids in the URL.
    if (err instanceof ServiceError) {
      if (err.code === 'not_found') return errorPage(c, 404, 'Not found', err.message);
      return errorPage(c, err.code === 'conflict' ? 409 : 422, 'Could not do that', err.message);
    }
    // The API's services (contacts, topics, segments) speak in ApiError and ValidationError.
    if (err instanceof ApiError && err.type === 'not_found') return errorPage(c, 404, 'Not found', err.message);
    if (err instanceof ApiError && err.status === 409) return errorPage(c, 409, 'Could not do that', err.message);
    if (err instanceof ValidationError) return errorPage(c, 422, 'Could not do that', err.message);
    // A project's template work queued past its bound (§22.8).
    if (err instanceof ApiError && err.type === 'rate_limit_exceeded') return errorPage(c, 429, 'Busy', err.message);
    c.var.deps.log.error({ err, requestId: c.var.requestId, path: c.req.path }, 'dashboard error');
    return c.html('<!doctype html><title>Error</title><p>Something went wrong. The error was logged.</p>', 500);
  });
  return app;
}
