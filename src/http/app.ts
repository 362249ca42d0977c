import { OpenAPIHono } from '@hono/zod-openapi';
import { swaggerUI } from '@hono/swagger-ui';
import { HTTPException } from 'hono/http-exception';
import { requestId } from 'hono/request-id';
import { ApiError, ValidationError, validationErrorFromZod } from './errors.ts';
import { boundJsonReads, refusedJsonRead } from './body.ts';
import { requireApiKey } from './auth.ts';
import { keyUseRecorder } from '../keys/authenticate.ts';
import type { AppDeps, AppEnv } from './context.ts';
import { registerHealthRoutes } from './health.ts';
import { matchedRoutes } from 'hono/route';
import { METRICS_CONTENT_TYPE, readQueueFrom, recordHttp, renderMetrics, scrapeAllowed } from '../platform/metrics.ts';
import { registerEmailRoutes } from '../emails/routes.ts';
import { registerDomainRoutes } from '../domains/routes.ts';
import { registerKeyRoutes } from '../keys/routes.ts';
import { registerWebhookRoutes } from '../webhooks/routes.ts';
import { registerSnsPushRoute } from '../events/sns-push.ts';
import { registerUnsubscribeRoutes } from '../unsubscribe/routes.ts';
import { registerTrackingRoutes } from '../tracking/routes.ts';
import { registerSinkRoutes } from '../sink/routes.ts';
import { createResendApp } from '../resend/routes.ts';
import { registerSuppressionRoutes } from '../suppressions/routes.ts';
import { registerAuditRoutes } from '../audit/routes.ts';
import { registerReputationRoutes } from '../reputation/routes.ts';
import { registerTemplateRoutes } from '../templates/routes.ts';
import { registerBroadcastRoutes } from '../broadcasts/routes.ts';
import { registerResendBroadcastRoutes } from '../broadcasts/resend-routes.ts';
import { registerResendTemplateRoutes } from '../templates/resend-routes.ts';
import { renderForSend, setTemplateCacheMb } from '../templates/service.ts';
import { createDashboard } from '../../dashboard/app.tsx';
import { registerReceivingRoutes } from '../inbound/routes.ts';
import { registerResendReceivingRoutes } from '../inbound/resend-routes.ts';
import { registerResendDomainRoutes } from '../domains/resend-routes.ts';
import { registerResendKeyRoutes } from '../keys/resend-routes.ts';
import { registerResendWebhookRoutes } from '../webhooks/resend-routes.ts';
import { registerDownloadRoutes } from '../inbound/download.ts';
import { registerSinkInboundRoute } from '../inbound/sink-routes.ts';
import { registerReceivingSetupRoutes } from '../inbound/receiving.ts';
import { registerContactImportRoutes } from '../contacts/imports/routes.ts';
import { registerResendContactImportRoutes } from '../contacts/imports/resend-routes.ts';
import { registerContactRoutes } from '../contacts/routes.ts';
import { registerContactPropertyRoutes } from '../contacts/property-routes.ts';
import { registerSegmentRoutes } from '../segments/routes.ts';
import { registerTopicRoutes } from '../topics/routes.ts';
import { registerResendContactRoutes } from '../contacts/resend-routes.ts';

/** Every route of the process is wired here; capability folders only export their routes. */
export function createApp(deps: AppDeps) {
  // Sends render templates at accept time; the emails capability only knows the interface. Set on
  // the caller's object rather than a copy, so dependencies swapped in later (tests) still reach
  // every route.
  deps.renderTemplate ??= renderForSend;
  setTemplateCacheMb(deps.config.templateCacheMb);
  const app = new OpenAPIHono<AppEnv>({
    defaultHook: (result) => {
      if (!result.success) throw validationErrorFromZod(result.error, result.target);
    },
  });

  app.use('*', requestId());
  app.use('*', async (c, next) => {
    c.set('deps', deps);
    const started = performance.now();
    await next();
    // The route pattern, never the raw path, so the series stay bounded; unrouted paths share one.
    const route = matchedRoutes(c).findLast((r) => r.method !== 'ALL')?.path ?? 'unmatched';
    recordHttp(c.req.method, route, c.res.status, (performance.now() - started) / 1000);
  });

  app.onError((err, c) => {
    if (err instanceof ValidationError) return c.json(err.toJSON(), 422);
    if (err instanceof ApiError) {
      for (const [name, value] of Object.entries(err.headers)) c.header(name, value);
      return c.json(err.toJSON(), err.status as 401);
    }
    if (err instanceof HTTPException) {
      // A body the bounded read refused (too large, too many values) says why, not "malformed".
      const refused = err.status === 400 ? refusedJsonRead(c) : undefined;
      if (refused instanceof ValidationError) return c.json(refused.toJSON(), 422);
      if (refused instanceof ApiError) return c.json(refused.toJSON(), refused.status as 413);
      if (err.status === 400 && /JSON/i.test(err.message)) {
        return c.json({ detail: [{ loc: ['body'], msg: 'Malformed JSON in request body', type: 'json_invalid' }] }, 422);
      }
      const type = err.status === 404 ? 'not_found' : err.status === 413 ? 'payload_too_large' : 'bad_request';
      return c.json({ error: { type, message: err.message || 'Bad request.' } }, err.status);
    }
    deps.log.error({ err, requestId: c.var.requestId, path: c.req.path }, 'unhandled error');
    return c.json({ error: { type: 'internal_error', message: 'Internal server error.' } }, 500);
  });

  app.notFound((c) => c.json({ error: { type: 'not_found', message: 'Route not found.' } }, 404));

  registerHealthRoutes(app);
  readQueueFrom(deps.sql);
  app.get('/metrics', async (c) => {
    if (!scrapeAllowed(deps.config.metricsToken, c.req.header('authorization'))) {
      return c.json({ error: { type: 'authentication_failed', message: 'A valid METRICS_TOKEN bearer token is required.' } }, 401);
    }
    return c.body(await renderMetrics(), 200, { 'content-type': METRICS_CONTENT_TYPE });
  });
  registerUnsubscribeRoutes(app);
  registerTrackingRoutes(app);
  registerDownloadRoutes(app);
  app.route('/dashboard', createDashboard());
  app.get('/', (c) => c.redirect('/dashboard', 302));

  // Routes that read their own body bound it themselves (readJsonBody); any JSON body read through
  // `c.req.json()`, the json validator's way, gets the §3.3 byte bound and the JSON shape bounds.
  const jsonReads = boundJsonReads(2 * deps.config.emailMaxMessageBytes + 1024 * 1024);
  app.use('/v1/*', jsonReads);
  app.use('/resend/*', jsonReads);
  const auth = requireApiKey(keyUseRecorder(deps.sql));
  app.use('/v1/*', async (c, next) => (c.req.path === '/v1/events/ses' ? next() : auth(c, next)));
  // Resend's API, for applications switching with only RESEND_BASE_URL; not in the schema.
  app.route('/resend', createResendApp(auth, (resend) => {
    // Before any `/contacts/:id` route, so `imports` is never read as a contact.
    registerResendContactImportRoutes(resend);
    registerResendTemplateRoutes(resend);
    registerResendReceivingRoutes(resend);
    registerResendContactRoutes(resend);
    registerResendDomainRoutes(resend);
    registerResendKeyRoutes(resend);
    registerResendWebhookRoutes(resend);
    registerResendBroadcastRoutes(resend);
  }));

  registerReceivingRoutes(app);
  registerEmailRoutes(app);
  registerDomainRoutes(app);
  registerReceivingSetupRoutes(app);
  registerKeyRoutes(app);
  registerWebhookRoutes(app);
  registerSinkRoutes(app);
  registerSinkInboundRoute(app);
  registerSuppressionRoutes(app);
  registerAuditRoutes(app);
  registerReputationRoutes(app);
  registerTemplateRoutes(app);
  // Before the contacts routes, so `/v1/contacts/imports` is never read as a contact's id or address.
  registerContactImportRoutes(app);
  registerContactRoutes(app);
  registerContactPropertyRoutes(app);
  registerSegmentRoutes(app);
  registerTopicRoutes(app);
  registerBroadcastRoutes(app);
  if (deps.config.eventIngestion === 'https') registerSnsPushRoute(app);

  app.openAPIRegistry.registerComponent('securitySchemes', 'bearerAuth', {
    type: 'http',
    scheme: 'bearer',
    description: 'An API key, `sk_…`, created with the CLI or the dashboard.',
  });
  app.doc31('/openapi.json', {
    openapi: '3.1.0',
    info: {
      title: 'Mailroom',
      version: '0.1.0',
      description: 'Self-hosted transactional email on your own AWS SES account.',
    },
  });
  app.get('/docs', swaggerUI({ url: '/openapi.json' }));

  return app;
}

export type App = ReturnType<typeof createApp>;
