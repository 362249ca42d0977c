import type { Context, Hono } from 'hono';
import { ServiceError } from '../../src/platform/errors.ts';
import { getEndpoint, listDeliveries, listEndpoints } from '../../src/webhooks/queries.ts';
import { createEndpoint, deleteEndpoint, getEndpointSecret, parseEventTypes, redeliver, rotateEndpointSecret, updateEndpoint } from '../../src/webhooks/service.ts';
import { isWellFormedId } from '../../src/platform/ids.ts';
import { BASE, type DashEnv } from '../env.ts';
import { DeliveriesPage, WebhookPage, WebhooksPage } from '../pages/webhooks.tsx';
import { base, errorPage, field, render } from '../render.tsx';
import { urlId } from '../params.ts';

/** The endpoint of this project named in the URL, or a 404 page. */
async function endpointOf(c: Context<DashEnv>) {
  return getEndpoint(c.var.deps.sql, c.var.project.id, urlId(c, 'endpointId', 'webhook'));
}

export const DELIVERIES_PER_PAGE = 50;

/** The ticked event types of a form; none ticked is every type. */
function eventTypesOf(body: Record<string, unknown>) {
  const value = body['event_types'];
  const list = (Array.isArray(value) ? value : value === undefined ? [] : [value]).filter((v): v is string => typeof v === 'string');
  return parseEventTypes(list);
}

const notFound = (c: Context<DashEnv>) => errorPage(c, 404, 'Not found', 'There is no such webhook endpoint in this project.');

export function registerWebhookRoutes(app: Hono<DashEnv>) {
  const list = (c: Context<DashEnv>) => `${BASE}/projects/${c.var.project.id}/webhooks`;

  app.get('/projects/:projectId/webhooks', async (c) => {
    const endpoints = await listEndpoints(c.var.deps.sql, c.var.project.id);
    return render(c, <WebhooksPage {...base(c)} endpoints={endpoints} />);
  });

  app.post('/projects/:projectId/webhooks', async (c) => {
    const { sql, config } = c.var.deps;
    const body = await c.req.parseBody({ all: true });
    const url = field(body, 'url');
    try {
      const { endpoint } = await createEndpoint(sql, config, c.var.project.id, url, { eventTypes: eventTypesOf(body) });
      return c.redirect(`${list(c)}/${endpoint.id}`, 303);
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      const endpoints = await listEndpoints(sql, c.var.project.id);
      return render(c, <WebhooksPage {...base(c)} endpoints={endpoints} url={url} error={err.message} />, 422);
    }
  });

  app.get('/projects/:projectId/webhooks/:endpointId', async (c) => {
    const endpoint = await endpointOf(c);
    if (!endpoint) return notFound(c);
    return render(c, <WebhookPage {...base(c)} endpoint={endpoint} />);
  });

  // A POST, so reading the secret needs the CSRF token and never sits in history or a cache.
  app.post('/projects/:projectId/webhooks/:endpointId/secret', async (c) => {
    const endpoint = await endpointOf(c);
    if (!endpoint) return notFound(c);
    const secret = await getEndpointSecret(c.var.deps.sql, c.var.deps.config, c.var.project.id, endpoint.id);
    return render(c, <WebhookPage {...base(c)} endpoint={endpoint} secret={secret} />);
  });

  // The new secret is shown on the page that answers, like a revealed one.
  app.post('/projects/:projectId/webhooks/:endpointId/rotate-secret', async (c) => {
    const endpoint = await endpointOf(c);
    if (!endpoint) return notFound(c);
    const rotated = await rotateEndpointSecret(c.var.deps.sql, c.var.deps.config, c.var.project.id, endpoint.id);
    return render(c, <WebhookPage {...base(c)} endpoint={rotated.endpoint} secret={rotated.secret} rotated />);
  });

  app.post('/projects/:projectId/webhooks/:endpointId/url', async (c) => {
    const { sql, config } = c.var.deps;
    const endpoint = await endpointOf(c);
    if (!endpoint) return notFound(c);
    const url = field(await c.req.parseBody(), 'url');
    try {
      await updateEndpoint(sql, config, c.var.project.id, endpoint.id, { url });
      return c.redirect(`${list(c)}/${endpoint.id}`, 303);
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      return render(c, <WebhookPage {...base(c)} endpoint={endpoint} url={url} error={err.message} />, 422);
    }
  });

  app.post('/projects/:projectId/webhooks/:endpointId/event-types', async (c) => {
    const endpoint = await endpointOf(c);
    if (!endpoint) return notFound(c);
    try {
      await updateEndpoint(c.var.deps.sql, c.var.deps.config, c.var.project.id, endpoint.id, { eventTypes: eventTypesOf(await c.req.parseBody({ all: true })) });
      return c.redirect(`${list(c)}/${endpoint.id}`, 303);
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      return render(c, <WebhookPage {...base(c)} endpoint={endpoint} error={err.message} />, 422);
    }
  });

  for (const [action, enabled] of [['enable', true], ['disable', false]] as const) {
    app.post(`/projects/:projectId/webhooks/:endpointId/${action}`, async (c) => {
      const endpoint = await endpointOf(c);
      if (!endpoint) return notFound(c);
      await updateEndpoint(c.var.deps.sql, c.var.deps.config, c.var.project.id, endpoint.id, { enabled });
      return c.redirect(`${list(c)}/${endpoint.id}`, 303);
    });
  }

  // An endpoint already gone is a ServiceError not_found: the 404 page.
  app.post('/projects/:projectId/webhooks/:endpointId/delete', async (c) => {
    await deleteEndpoint(c.var.deps.sql, c.var.project.id, urlId(c, 'endpointId', 'webhook'));
    return c.redirect(list(c), 303);
  });

  app.get('/projects/:projectId/webhooks/:endpointId/deliveries', async (c) => {
    const endpoint = await endpointOf(c);
    if (!endpoint) return notFound(c);
    const after = c.req.query('after') || undefined;
    if (after && !isWellFormedId('delivery', after)) return errorPage(c, 404, 'Not found', 'That page of deliveries does not exist.');
    const redelivered = c.req.query('redelivered');
    const page = await listDeliveries(c.var.deps.sql, c.var.project.id, endpoint.id, { limit: DELIVERIES_PER_PAGE, startingAfter: after });
    return render(c, <DeliveriesPage {...base(c)} endpoint={endpoint} deliveries={page.rows} hasMore={page.hasMore} isFirst={!after}
      redelivered={redelivered && isWellFormedId('delivery', redelivered) ? redelivered : undefined} />);
  });

  // Disabled endpoints and unknown deliveries come back as ServiceErrors, which the app's
  // error handler turns into a 409 or 404 page with the service's own message.
  app.post('/projects/:projectId/webhooks/:endpointId/deliveries/:deliveryId/redeliver', async (c) => {
    const endpointId = urlId(c, 'endpointId', 'webhook');
    const delivery = await redeliver(c.var.deps.sql, c.var.project.id, endpointId, urlId(c, 'deliveryId', 'delivery'));
    return c.redirect(`${list(c)}/${endpointId}/deliveries?redelivered=${delivery.id}`, 303);
  });
}
