import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { ApiError, errorResponses, requireId } from '../http/errors.ts';
import type { AppEnv } from '../http/context.ts';
import { SECURITY } from '../http/security.ts';
import { WebhookDeliveryList, WebhookDeliveryResponse, WebhookEndpointList, toDeliveryResponse, toEndpointResponse } from './schemas.ts';
import { deleteEndpoint, redeliver } from './service.ts';
import { ServiceError } from '../platform/errors.ts';
import * as q from './queries.ts';

const list = createRoute({
  method: 'get',
  path: '/v1/webhooks',
  tags: ['webhooks'],
  summary: 'List webhook endpoints',
  description: 'Every endpoint of the project, disabled ones included. The signing secret is not included.',
  security: SECURITY,
  responses: {
    200: { description: 'The endpoints.', content: { 'application/json': { schema: WebhookEndpointList } } },
    ...errorResponses(401, 429),
  },
});

const deliveries = createRoute({
  method: 'get',
  path: '/v1/webhooks/{endpoint_id}/deliveries',
  tags: ['webhooks'],
  summary: 'List recent webhook deliveries',
  description:
    `The ${q.RECENT_DELIVERIES} most recent deliveries to the endpoint, newest first, pending retries included. ` +
    'An unknown endpoint, or one of another project, answers 404. `error` is one word: timeout, connection_refused, ' +
    'connection_reset, host_unreachable, dns_failure, tls_error, connection_failed, destination_blocked, ' +
    'redirect_not_followed, http_error (the status is in response_status), endpoint_disabled or secret_unreadable.',
  security: SECURITY,
  request: { params: z.object({ endpoint_id: z.string().max(100) }) },
  responses: {
    200: { description: 'The deliveries.', content: { 'application/json': { schema: WebhookDeliveryList } } },
    ...errorResponses(401, 404, 422, 429),
  },
});

const retry = createRoute({
  method: 'post',
  path: '/v1/webhooks/{endpoint_id}/deliveries/{delivery_id}/retry',
  tags: ['webhooks'],
  summary: 'Redeliver',
  description:
    'Sends the delivery\'s event to the endpoint again now, as a new delivery (202, the new delivery). ' +
    'A disabled endpoint answers 409 `endpoint_disabled`; a delivery of another endpoint or project, 404.',
  security: SECURITY,
  request: { params: z.object({ endpoint_id: z.string().max(100), delivery_id: z.string().max(100) }) },
  responses: {
    202: { description: 'The new delivery, pending.', content: { 'application/json': { schema: WebhookDeliveryResponse } } },
    ...errorResponses(401, 404, 409, 422, 429),
  },
});

const remove = createRoute({
  method: 'delete',
  path: '/v1/webhooks/{endpoint_id}',
  tags: ['webhooks'],
  summary: 'Delete a webhook endpoint',
  description:
    'Deletes the endpoint with its deliveries: those still pending are never sent, and no new event goes to it. ' +
    'The events themselves stay. An unknown endpoint, one of another project, or one already deleted answers 404.',
  security: SECURITY,
  request: { params: z.object({ endpoint_id: z.string().max(100) }) },
  responses: {
    204: { description: 'Deleted.' },
    ...errorResponses(401, 404, 422, 429),
  },
});

export function registerWebhookRoutes(app: OpenAPIHono<AppEnv>) {
  app.openapi(remove, async (c) => {
    const endpointId = requireId('webhook', c.req.valid('param').endpoint_id, 'Webhook endpoint not found.');
    try {
      await deleteEndpoint(c.var.deps.sql, c.var.projectId, endpointId);
    } catch (err) {
      if (err instanceof ServiceError && err.code === 'not_found') throw new ApiError('not_found', err.message);
      throw err;
    }
    return c.body(null, 204);
  });

  app.openapi(list, async (c) => {
    const rows = await q.listEndpoints(c.var.deps.sql, c.var.projectId);
    return c.json({ data: rows.map(toEndpointResponse) }, 200);
  });

  app.openapi(retry, async (c) => {
    const params = c.req.valid('param');
    const endpointId = requireId('webhook', params.endpoint_id, 'Webhook endpoint not found.');
    const deliveryId = requireId('delivery', params.delivery_id, 'Webhook delivery not found.');
    try {
      const row = await redeliver(c.var.deps.sql, c.var.projectId, endpointId, deliveryId);
      return c.json(toDeliveryResponse(row), 202);
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      throw err.code === 'conflict' ? new ApiError('endpoint_disabled', err.message) : new ApiError('not_found', err.message);
    }
  });

  app.openapi(deliveries, async (c) => {
    const { sql } = c.var.deps;
    const endpointId = requireId('webhook', c.req.valid('param').endpoint_id, 'Webhook endpoint not found.');
    if (!(await q.getEndpoint(sql, c.var.projectId, endpointId))) throw new ApiError('not_found', 'Webhook endpoint not found.');
    const rows = await q.listRecentDeliveries(sql, c.var.projectId, endpointId);
    return c.json({ data: rows.map(toDeliveryResponse) }, 200);
  });
}
