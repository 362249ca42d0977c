import type { Hono } from 'hono';
import type { AppEnv } from '../http/context.ts';
import { readJsonBody } from '../http/body.ts';
import { ApiError, ValidationError } from '../http/errors.ts';
import { isWellFormedId } from '../platform/ids.ts';
import { ServiceError } from '../platform/errors.ts';
import { resendPageQuery } from '../resend/paging.ts';
import type { EndpointRow } from './schemas.ts';
import { getEndpoint, getSealedSecret, listEndpointsPage } from './queries.ts';
import { openSecret } from './secret.ts';
import { createEndpoint, deleteEndpoint, parseEventTypes, rotateEndpointSecret, updateEndpoint } from './service.ts';

/**
 * `resend.webhooks.*` at `/resend/webhooks`, through the same service as the CLI and dashboard
 * (destination checks, audit entries). `webhooks.get` answers the signing secret, as Resend's
 * does (its SDK types it as always there): the full key that reads it could as well point the
 * endpoint elsewhere or rotate it. A secret sealed under another SECRET_KEY reads as "".
 */

const status = (row: EndpointRow) => (row.status === 'active' ? 'enabled' as const : 'disabled' as const);
const toResendWebhook = (row: EndpointRow) => ({ id: row.id, endpoint: row.url, created_at: row.createdAt.toISOString(), status: status(row), events: row.eventTypes });
const invalid = (field: string, msg: string) => new ValidationError([{ loc: ['body', field], msg, type: 'value_error' }]);

const endpointId = (value: string | undefined) => {
  if (!value || !isWellFormedId('webhook', value)) throw new ApiError('not_found', 'Webhook not found.');
  return value;
};

function events(value: unknown) {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.some((e) => typeof e !== 'string')) throw invalid('events', 'events must be a list of event types');
  try {
    return parseEventTypes(value as string[]);
  } catch (err) {
    if (err instanceof ServiceError) throw invalid('events', err.message);
    throw err;
  }
}

/** The service's refusals (a destination it will not post to, nothing to change) as Resend errors. */
function asResendError(field: string) {
  return (err: unknown): never => {
    if (!(err instanceof ServiceError)) throw err;
    if (err.code === 'not_found') throw new ApiError('not_found', 'Webhook not found.');
    throw invalid(field, err.message);
  };
}

export function registerResendWebhookRoutes(app: Hono<AppEnv>) {
  app.post('/webhooks', async (c) => {
    const { sql, config } = c.var.deps;
    const body = (await readJsonBody(c, 64 * 1024)) as Record<string, unknown> | null;
    if (!body || typeof body !== 'object' || typeof body.endpoint !== 'string') throw invalid('endpoint', 'endpoint is required: the URL to post events to');
    const eventTypes = events(body.events);
    const { endpoint, secret } = await createEndpoint(sql, config, c.var.projectId, body.endpoint, { eventTypes }).catch(asResendError('endpoint'));
    return c.json({ object: 'webhook', id: endpoint.id, signing_secret: secret }, 200);
  });

  app.get('/webhooks', async (c) => {
    const { limit, after, before, cursor } = resendPageQuery(c);
    const { sql } = c.var.deps;
    if (cursor !== undefined && !(isWellFormedId('webhook', cursor) && await getEndpoint(sql, c.var.projectId, cursor))) {
      throw new ApiError('not_found', 'The cursor does not name a webhook of this project.');
    }
    const page = await listEndpointsPage(sql, c.var.projectId, { limit, after, before });
    return c.json({ object: 'list', has_more: page.hasMore, data: page.rows.map(toResendWebhook) }, 200);
  });

  app.get('/webhooks/:id', async (c) => {
    const { sql, config } = c.var.deps;
    const id = endpointId(c.req.param('id'));
    const row = await getEndpoint(sql, c.var.projectId, id);
    const sealed = row && await getSealedSecret(sql, c.var.projectId, id);
    if (!row || !sealed) throw new ApiError('not_found', 'Webhook not found.');
    let secret = '';
    try {
      secret = openSecret(config, sealed);
    } catch {
      // Sealed under another SECRET_KEY: deliveries fail as `secret_unreadable` until it is rotated.
    }
    return c.json({ object: 'webhook', ...toResendWebhook(row), signing_secret: secret }, 200);
  });

  app.patch('/webhooks/:id', async (c) => {
    const { sql, config } = c.var.deps;
    const id = endpointId(c.req.param('id'));
    const body = ((await readJsonBody(c, 64 * 1024)) ?? {}) as Record<string, unknown>;
    if (body.endpoint !== undefined && typeof body.endpoint !== 'string') throw invalid('endpoint', 'endpoint must be a URL');
    if (body.status !== undefined && body.status !== 'enabled' && body.status !== 'disabled') throw invalid('status', 'status must be enabled or disabled');
    const change = { url: body.endpoint as string | undefined, enabled: body.status === undefined ? undefined : body.status === 'enabled', eventTypes: events(body.events) };
    await updateEndpoint(sql, config, c.var.projectId, id, change).catch(asResendError(change.url !== undefined ? 'endpoint' : 'body'));
    return c.json({ object: 'webhook', id }, 200);
  });

  app.delete('/webhooks/:id', async (c) => {
    const id = endpointId(c.req.param('id'));
    await deleteEndpoint(c.var.deps.sql, c.var.projectId, id).catch(asResendError('id'));
    return c.json({ object: 'webhook', id, deleted: true }, 200);
  });

  app.post('/webhooks/:id/signing-secret/rotate', async (c) => {
    const id = endpointId(c.req.param('id'));
    const { secret } = await rotateEndpointSecret(c.var.deps.sql, c.var.deps.config, c.var.projectId, id).catch(asResendError('id'));
    return c.json({ object: 'webhook', id, signing_secret: secret }, 200);
  });
}
