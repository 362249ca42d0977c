import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { ApiError, ValidationError, errorResponses } from '../http/errors.ts';
import type { AppEnv } from '../http/context.ts';
import { SECURITY } from '../http/security.ts';
import { readJsonBody } from '../http/body.ts';
import { isMailbox } from '../emails/mailbox.ts';
import { normaliseAddress, storedAddress } from './address.ts';
import { getSuppression, listSuppressions, type Suppression } from './queries.ts';
import { liftManually, suppressManually } from './service.ts';

const SuppressionResponse = z
  .object({
    email: z.string().openapi({ example: 'ann@example.net' }),
    reason: z.enum(['bounced', 'complained', 'unsubscribed', 'manual']),
    created_at: z.string().datetime(),
  })
  .openapi('SuppressionResponse');

const SuppressionList = z.object({ data: z.array(SuppressionResponse), has_more: z.boolean() }).openapi('SuppressionList');
const AddSuppressionRequest = z.object({ email: z.string().max(320) }).openapi('AddSuppressionRequest');

const toResponse = (s: Suppression): z.infer<typeof SuppressionResponse> =>
  ({ email: s.address, reason: s.reason, created_at: s.createdAt.toISOString() });

/** A bare address as stored: lower-cased, display name dropped. Anything else is not an address. */
function addressOf(value: string, loc: (string | number)[]): string {
  if (!isMailbox(value)) throw new ValidationError([{ loc, msg: 'Not an email address', type: 'value_error', input: value }]);
  return normaliseAddress(value);
}

const list = createRoute({
  method: 'get',
  path: '/v1/suppressions',
  tags: ['suppressions'],
  summary: 'List suppressed addresses',
  description:
    'The project\'s suppression list, newest first. Mail to these addresses is dropped at send time. ' +
    '`starting_after` takes the last `email` of the previous page; `email` shows only that address.',
  security: SECURITY,
  request: {
    query: z.object({
      limit: z.coerce.number().int().min(1).max(100).default(25),
      starting_after: z.string().max(320).optional(),
      email: z.string().max(320).optional(),
    }),
  },
  responses: {
    200: { description: 'A page of suppressions.', content: { 'application/json': { schema: SuppressionList } } },
    ...errorResponses(401, 404, 422, 429),
  },
});

const add = createRoute({
  method: 'post',
  path: '/v1/suppressions',
  tags: ['suppressions'],
  summary: 'Suppress an address',
  description: 'Adds the address with reason `manual` (201). An address already suppressed keeps its entry and reason (200).',
  security: SECURITY,
  request: { body: { required: true, content: { 'application/json': { schema: AddSuppressionRequest } } } },
  responses: {
    200: { description: 'Already suppressed; the existing entry.', content: { 'application/json': { schema: SuppressionResponse } } },
    201: { description: 'Suppressed.', content: { 'application/json': { schema: SuppressionResponse } } },
    ...errorResponses(401, 413, 422, 429),
  },
});

const lift = createRoute({
  method: 'delete',
  path: '/v1/suppressions/{email}',
  tags: ['suppressions'],
  summary: 'Lift a suppression',
  description: 'Removes the address from the list, so it receives mail again. 404 when it is not suppressed.',
  security: SECURITY,
  request: { params: z.object({ email: z.string().max(320) }) },
  responses: {
    204: { description: 'Lifted.' },
    ...errorResponses(401, 404, 422, 429),
  },
});

const MAX_BODY_BYTES = 16 * 1024;

export function registerSuppressionRoutes(app: OpenAPIHono<AppEnv>) {
  app.openapi(list, async (c) => {
    const { limit, starting_after: startingAfter, email } = c.req.valid('query');
    const { sql } = c.var.deps;
    const projectId = c.var.projectId;
    const after = startingAfter === undefined ? undefined : storedAddress(startingAfter);
    if (startingAfter !== undefined && !(after && await getSuppression(sql, projectId, after))) {
      throw new ApiError('not_found', 'starting_after does not name a suppression of this project.');
    }
    const address = email === undefined ? undefined : storedAddress(email);
    // A filter that is not an address can match nothing.
    if (email !== undefined && !address) return c.json({ data: [], has_more: false }, 200);
    const page = await listSuppressions(sql, projectId, { limit, startingAfter: after, address });
    return c.json({ data: page.rows.map(toResponse), has_more: page.hasMore }, 200);
  });

  // The body is read with a byte bound, like every JSON body of the API.
  app.openAPIRegistry.registerPath(add);
  app.post(add.path, async (c) => {
    const body = await readJsonBody(c, MAX_BODY_BYTES);
    const parsed = AddSuppressionRequest.safeParse(body);
    if (!parsed.success) throw new ValidationError([{ loc: ['body', 'email'], msg: 'Field required: a string', type: 'missing' }]);
    const address = addressOf(parsed.data.email, ['body', 'email']);
    const { sql } = c.var.deps;
    const added = await suppressManually(sql, c.var.projectId, address);
    const row = await getSuppression(sql, c.var.projectId, address);
    return c.json(toResponse(row!), added ? 201 : 200);
  });

  app.openapi(lift, async (c) => {
    const address = storedAddress(c.req.valid('param').email);
    if (!address || !(await liftManually(c.var.deps.sql, c.var.projectId, address))) {
      throw new ApiError('not_found', 'That address is not suppressed in this project.');
    }
    return c.body(null, 204);
  });
}
