import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { ApiError, errorResponses } from '../http/errors.ts';
import type { AppEnv } from '../http/context.ts';
import { SECURITY } from '../http/security.ts';
import { isWellFormedId } from '../platform/ids.ts';
import { AUDIT_ACTIONS } from './record.ts';
import { auditEntryExists, listAudit, toAuditEntry } from './queries.ts';
import { PAGE_QUERY } from '../http/paging.ts';

const AuditEntry = z
  .object({
    id: z.string().openapi({ example: 'aud_01JD3Z8K6Q5W0R1S2T3V4X5Y6Z' }),
    at: z.string().datetime(),
    actor: z.object({
      type: z.enum(['member', 'api_key', 'cli', 'system']),
      id: z.string().nullable(),
      label: z.string().nullable(),
    }),
    action: z.string().openapi({ example: 'api_key.created' }),
    project_id: z.string().nullable(),
    target: z.object({ type: z.string(), id: z.string().nullable() }),
    ip: z.string().nullable(),
    changes: z.record(z.string(), z.unknown()).nullable(),
  })
  .openapi('AuditEntry');

const AuditList = z.object({ data: z.array(AuditEntry), has_more: z.boolean() }).openapi('AuditLogList');

const list = createRoute({
  method: 'get',
  path: '/v1/audit-log',
  tags: ['audit-log'],
  summary: 'List audit log entries',
  description:
    'Every change made to the key\'s project through the dashboard, the API or the CLI, newest first. ' +
    '`starting_after` takes the last `id` of the previous page; `action` shows only that action. A full key only. ' +
    'Entries never hold a key, a signing secret or a password.',
  security: SECURITY,
  request: {
    query: z.object({
      ...PAGE_QUERY,
      action: z.enum(AUDIT_ACTIONS).optional().openapi({ description: 'Only entries of this action, such as `api_key.created`.' }),
    }),
  },
  responses: {
    200: { description: 'A page of entries.', content: { 'application/json': { schema: AuditList } } },
    ...errorResponses(401, 403, 404, 422, 429),
  },
});

export function registerAuditRoutes(app: OpenAPIHono<AppEnv>) {
  app.openapi(list, async (c) => {
    const { limit, starting_after: startingAfter, action } = c.req.valid('query');
    const { sql } = c.var.deps;
    const projectId = c.var.projectId;
    if (startingAfter && !(isWellFormedId('audit', startingAfter) && await auditEntryExists(sql, startingAfter, projectId))) {
      throw new ApiError('not_found', 'starting_after does not name an audit log entry of this project.');
    }
    const page = await listAudit(sql, { limit, startingAfter, action, projectId });
    return c.json({ data: page.rows.map(toAuditEntry), has_more: page.hasMore }, 200);
  });
}
