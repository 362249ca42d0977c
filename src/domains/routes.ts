import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { ApiError, errorResponses, requireId, ValidationError } from '../http/errors.ts';
import type { AppEnv } from '../http/context.ts';
import { SECURITY } from '../http/security.ts';
import { ServiceError } from '../platform/errors.ts';
import { DomainList, DomainResponse, UpdateDomainRequest, toDomainResponse } from './schemas.ts';
import { findDomain, listDomains } from './queries.ts';
import { deleteDomain, TrackingDomainRefused, TrackingUnavailable, updateDomainTracking } from './service.ts';
import { normaliseDomainName } from './names.ts';

const list = createRoute({
  method: 'get',
  path: '/v1/domains',
  tags: ['domains'],
  summary: 'List sending domains',
  description: 'Every domain of the project, with the DNS records to publish and the statuses SES last reported.',
  security: SECURITY,
  responses: {
    200: { description: 'The domains.', content: { 'application/json': { schema: DomainList } } },
    ...errorResponses(401, 429),
  },
});

const get = createRoute({
  method: 'get',
  path: '/v1/domains/{domain_id}',
  tags: ['domains'],
  summary: 'Retrieve a domain',
  security: SECURITY,
  request: { params: z.object({ domain_id: z.string().max(100) }) },
  responses: {
    200: { description: 'The domain.', content: { 'application/json': { schema: DomainResponse } } },
    ...errorResponses(401, 404, 422, 429),
  },
});

const update = createRoute({
  method: 'patch',
  path: '/v1/domains/{domain_id}',
  tags: ['domains'],
  summary: 'Update a domain\'s tracking',
  description:
    'Switches open and click tracking for mail whose `from` is at this domain, and sets or clears its tracking domain. ' +
    'Fields left out stay as they are; both switches are off by default. Switching on with neither a `tracking_domain` ' +
    'nor PUBLIC_BASE_URL on the server answers 422 `tracking_unavailable`. See docs/tracking.md.',
  security: SECURITY,
  request: {
    params: z.object({ domain_id: z.string().max(100) }),
    body: { required: true, content: { 'application/json': { schema: UpdateDomainRequest } } },
  },
  responses: {
    200: { description: 'The domain.', content: { 'application/json': { schema: DomainResponse } } },
    ...errorResponses(401, 404, 422, 429),
  },
});

const remove = createRoute({
  method: 'delete',
  path: '/v1/domains/{domain_id}',
  tags: ['domains'],
  summary: 'Delete a domain',
  description:
    'Removes the domain from the project. The SES identity in your AWS account is never touched: delete it there ' +
    'yourself if nothing else uses it. Emails already sent from the domain are untouched. While receiving is on ' +
    'the answer is 409 `domain_receiving_on`: call `DELETE /v1/domains/{domain_id}/receiving` first. ' +
    'An unknown domain, or one of another project, answers 404.',
  security: SECURITY,
  request: { params: z.object({ domain_id: z.string().max(100) }) },
  responses: {
    204: { description: 'Deleted.' },
    ...errorResponses(401, 404, 409, 422, 429),
  },
});

export function registerDomainRoutes(app: OpenAPIHono<AppEnv>) {
  app.openapi(remove, async (c) => {
    const domainId = requireId('domain', c.req.valid('param').domain_id, 'Domain not found.');
    try {
      await deleteDomain(c.var.deps.sql, c.var.projectId, domainId);
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      throw err.code === 'conflict' ? new ApiError('domain_receiving_on', err.message) : new ApiError('not_found', err.message);
    }
    return c.body(null, 204);
  });

  app.openapi(list, async (c) => {
    const rows = await listDomains(c.var.deps.sql, c.var.projectId);
    return c.json({ data: rows.map(toDomainResponse) }, 200);
  });

  app.openapi(get, async (c) => {
    const domainId = requireId('domain', c.req.valid('param').domain_id, 'Domain not found.');
    const row = await findDomain(c.var.deps.sql, c.var.projectId, domainId);
    if (!row) throw new ApiError('not_found', 'Domain not found.');
    return c.json(toDomainResponse(row), 200);
  });

  app.openapi(update, async (c) => {
    const domainId = requireId('domain', c.req.valid('param').domain_id, 'Domain not found.');
    const body = c.req.valid('json');
    if (body.tracking_domain) {
      try {
        normaliseDomainName(body.tracking_domain, 'tracking domain');
      } catch (err) {
        if (!(err instanceof ServiceError)) throw err;
        throw new ValidationError([{ loc: ['body', 'tracking_domain'], msg: err.message, type: 'value_error' }]);
      }
    }
    try {
      const row = await updateDomainTracking(c.var.deps.sql, c.var.deps.config, c.var.projectId, domainId, {
        openTracking: body.open_tracking,
        clickTracking: body.click_tracking,
        trackingDomain: body.tracking_domain,
      });
      return c.json(toDomainResponse(row), 200);
    } catch (err) {
      if (err instanceof TrackingDomainRefused) {
        throw new ValidationError([{ loc: ['body', 'tracking_domain'], msg: err.message, type: 'value_error' }]);
      }
      if (err instanceof TrackingUnavailable) {
        throw new ValidationError(err.fields.map((f) => ({ loc: ['body', f], msg: err.message, type: 'tracking_unavailable' })));
      }
      if (!(err instanceof ServiceError)) throw err;
      if (err.code === 'not_found') throw new ApiError('not_found', 'Domain not found.');
      throw new ValidationError([{ loc: ['body'], msg: err.message, type: 'value_error' }]);
    }
  });
}
