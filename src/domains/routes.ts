import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { errorResponses } from '../http/errors.ts';
import type { AppEnv } from '../http/context.ts';
import { SECURITY } from '../http/security.ts';
import { DomainList, toDomainResponse } from './schemas.ts';
import { listDomains } from './queries.ts';

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

export function registerDomainRoutes(app: OpenAPIHono<AppEnv>) {
  app.openapi(list, async (c) => {
    const rows = await listDomains(c.var.deps.sql, c.var.projectId);
    return c.json({ data: rows.map(toDomainResponse) }, 200);
  });
}
