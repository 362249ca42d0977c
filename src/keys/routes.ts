import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { errorResponses } from '../http/errors.ts';
import type { AppEnv } from '../http/context.ts';
import { SECURITY } from '../http/security.ts';
import { listKeys, type ApiKeyRow } from './queries.ts';

const APIKeyResponse = z
  .object({
    id: z.string(),
    name: z.string(),
    key_prefix: z.string(),
    permission: z.enum(['full', 'sending']).openapi({ description: '`full`, or `sending`: send, batch, reschedule and cancel only.' }),
    created_at: z.string().datetime(),
    last_used_at: z.string().datetime().nullable().optional(),
    revoked_at: z.string().datetime().nullable().optional(),
  })
  .openapi('APIKeyResponse');

const APIKeyList = z.object({ data: z.array(APIKeyResponse) }).openapi('APIKeyList');

export function toKeyResponse(row: ApiKeyRow): z.infer<typeof APIKeyResponse> {
  return {
    id: row.id,
    name: row.name,
    key_prefix: row.keyPrefix,
    permission: row.permission,
    created_at: row.createdAt.toISOString(),
    last_used_at: row.lastUsedAt?.toISOString() ?? null,
    revoked_at: row.revokedAt?.toISOString() ?? null,
  };
}

const list = createRoute({
  method: 'get',
  path: '/v1/api-keys',
  tags: ['api-keys'],
  summary: 'List API keys',
  description: 'Every key of the calling key\'s project, revoked ones included. The secret is never returned.',
  security: SECURITY,
  responses: {
    200: { description: 'The keys.', content: { 'application/json': { schema: APIKeyList } } },
    ...errorResponses(401, 429),
  },
});

export function registerKeyRoutes(app: OpenAPIHono<AppEnv>) {
  app.openapi(list, async (c) => {
    const rows = await listKeys(c.var.deps.sql, c.var.projectId);
    return c.json({ data: rows.map(toKeyResponse) }, 200);
  });
}
