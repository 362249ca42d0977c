import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { ApiError, errorResponses, requireId } from '../http/errors.ts';
import { isWellFormedId } from '../platform/ids.ts';
import type { AppEnv } from '../http/context.ts';
import { SECURITY } from '../http/security.ts';
import { SinkMessageList, SinkMessageResponse, toSinkMessage, toSinkSummary } from './schemas.ts';
import * as store from './store.ts';
import { PAGE_QUERY } from '../http/paging.ts';

const list = createRoute({
  method: 'get',
  path: '/v1/sink/messages',
  tags: ['sink'],
  summary: 'List caught messages',
  description: 'Messages the built-in SMTP sink caught for the project, newest first, with cursor paging on `starting_after`.',
  security: SECURITY,
  request: {
    query: z.object({
      ...PAGE_QUERY,
    }),
  },
  responses: {
    200: { description: 'A page of caught messages.', content: { 'application/json': { schema: SinkMessageList } } },
    ...errorResponses(401, 404, 422, 429),
  },
});

const get = createRoute({
  method: 'get',
  path: '/v1/sink/messages/{message_id}',
  tags: ['sink'],
  summary: 'Retrieve a caught message',
  description: 'The message with its bodies, headers, attachment list and raw source.',
  security: SECURITY,
  request: { params: z.object({ message_id: z.string().max(100) }) },
  responses: {
    200: { description: 'The caught message.', content: { 'application/json': { schema: SinkMessageResponse } } },
    ...errorResponses(401, 404, 422, 429),
  },
});

const clear = createRoute({
  method: 'delete',
  path: '/v1/sink/messages',
  tags: ['sink'],
  summary: 'Empty the sink',
  description: 'Deletes every message the sink caught for the project.',
  security: SECURITY,
  responses: {
    204: { description: 'The project\'s sink is empty.' },
    ...errorResponses(401, 429),
  },
});

export function registerSinkRoutes(app: OpenAPIHono<AppEnv>) {
  app.openapi(list, async (c) => {
    const { limit, starting_after: startingAfter } = c.req.valid('query');
    const { sql } = c.var.deps;
    if (startingAfter && !(isWellFormedId('sinkMessage', startingAfter) && await store.sinkMessageExists(sql, c.var.projectId, startingAfter))) {
      throw new ApiError('not_found', 'starting_after does not name a sink message of this project.');
    }
    const page = await store.listSinkMessages(sql, c.var.projectId, { limit, startingAfter });
    return c.json({ data: page.rows.map(toSinkSummary), has_more: page.hasMore }, 200);
  });

  app.openapi(get, async (c) => {
    const messageId = requireId('sinkMessage', c.req.valid('param').message_id, 'Sink message not found.');
    const row = await store.getSinkMessage(c.var.deps.sql, c.var.projectId, messageId);
    if (!row) throw new ApiError('not_found', 'Sink message not found.');
    return c.json(toSinkMessage(row), 200);
  });

  app.openapi(clear, async (c) => {
    await store.deleteSinkMessages(c.var.deps.sql, c.var.projectId);
    return c.body(null, 204);
  });
}
