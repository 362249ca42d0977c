import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { ApiError, errorResponses } from '../http/errors.ts';
import type { AppEnv } from '../http/context.ts';
import { SECURITY } from '../http/security.ts';
import { EMAIL_STATUSES, EmailList, EmailResponse, toEmailResponse } from './schemas.ts';
import * as q from './queries.ts';

const listEmails = createRoute({
  method: 'get',
  path: '/v1/emails',
  tags: ['emails'],
  summary: 'List emails',
  description: 'The project\'s emails, newest first, with cursor paging on `starting_after`.',
  security: SECURITY,
  request: {
    query: z.object({
      limit: z.coerce.number().int().min(1).max(100).default(25).openapi({ description: '1 to 100, default 25.' }),
      starting_after: z.string().max(100).optional().openapi({ description: 'The last id of the previous page.' }),
      status: z.enum(EMAIL_STATUSES).optional(),
    }),
  },
  responses: {
    200: { description: 'A page of emails.', content: { 'application/json': { schema: EmailList } } },
    ...errorResponses(401, 404, 422, 429),
  },
});

const getEmail = createRoute({
  method: 'get',
  path: '/v1/emails/{email_id}',
  tags: ['emails'],
  summary: 'Retrieve an email',
  security: SECURITY,
  request: { params: z.object({ email_id: z.string().max(100) }) },
  responses: {
    200: { description: 'The email.', content: { 'application/json': { schema: EmailResponse } } },
    ...errorResponses(401, 404, 422, 429),
  },
});

export function registerEmailRoutes(app: OpenAPIHono<AppEnv>) {
  app.openapi(listEmails, async (c) => {
    const { limit, starting_after: startingAfter, status } = c.req.valid('query');
    const projectId = c.var.projectId;
    const sql = c.var.deps.sql;
    if (startingAfter && !(await q.emailExists(sql, projectId, startingAfter))) {
      throw new ApiError('not_found', 'starting_after does not name an email of this project.');
    }
    const page = await q.listEmails(sql, projectId, { limit, startingAfter, status });
    return c.json({ data: page.rows.map(toEmailResponse), has_more: page.hasMore }, 200);
  });

  app.openapi(getEmail, async (c) => {
    const row = await q.getEmail(c.var.deps.sql, c.var.projectId, c.req.valid('param').email_id);
    if (!row) throw new ApiError('not_found', 'Email not found.');
    return c.json(toEmailResponse(row), 200);
  });
}
