import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { ApiError, errorResponses } from '../http/errors.ts';
import type { AppEnv } from '../http/context.ts';
import { SECURITY } from '../http/security.ts';
import { readJsonBody } from '../http/body.ts';
import { PAGE_QUERY } from '../http/paging.ts';
import * as q from './queries.ts';
import { CreateTopicRequest, TopicList, TopicResponse, UpdateTopicRequest, createTopic, deleteTopic, requireTopic, toTopicResponse, updateTopic } from './service.ts';

const IdParam = z.object({ topic_id: z.string().max(100).openapi({ description: 'The topic\'s id (`topic_…`).' }) });
const json = <T extends z.ZodTypeAny>(schema: T) => ({ required: true, content: { 'application/json': { schema } } });
const ok = <T extends z.ZodTypeAny>(description: string, schema: T) => ({ description, content: { 'application/json': { schema } } });
const tags = ['topics'];
const BODY_LIMIT = 16 * 1024;

const create = createRoute({
  method: 'post', path: '/v1/topics', tags, summary: 'Create a topic', security: SECURITY,
  description: '`default_subscription` is fixed at creation: `opt_in` reaches every contact but those who opted out, `opt_out` only those who opted in.',
  request: { body: json(CreateTopicRequest) },
  responses: { 201: ok('The topic.', TopicResponse), ...errorResponses(401, 403, 413, 422, 429) },
});
const list = createRoute({
  method: 'get', path: '/v1/topics', tags, summary: 'List topics', security: SECURITY,
  description: 'Newest first, with cursor paging on `starting_after`.',
  request: { query: z.object(PAGE_QUERY) },
  responses: { 200: ok('A page of topics.', TopicList), ...errorResponses(401, 403, 404, 422, 429) },
});
const get = createRoute({
  method: 'get', path: '/v1/topics/{topic_id}', tags, summary: 'Retrieve a topic', security: SECURITY,
  request: { params: IdParam },
  responses: { 200: ok('The topic.', TopicResponse), ...errorResponses(401, 403, 404, 422, 429) },
});
const update = createRoute({
  method: 'patch', path: '/v1/topics/{topic_id}', tags, summary: 'Update a topic', security: SECURITY,
  description: 'Changes `name`, `description` or `visibility`; `default_subscription` cannot change. An `id` in the body is ignored.',
  request: { params: IdParam, body: json(UpdateTopicRequest) },
  responses: { 200: ok('The topic.', TopicResponse), ...errorResponses(401, 403, 404, 413, 422, 429) },
});
const remove = createRoute({
  method: 'delete', path: '/v1/topics/{topic_id}', tags, summary: 'Delete a topic', security: SECURITY,
  description: 'The contacts\' choices for it go too. No contact.* event is fired for them.',
  request: { params: IdParam },
  responses: { 204: { description: 'Deleted.' }, ...errorResponses(401, 403, 404, 422, 429) },
});

const pathOf = (route: { path: string }) => route.path.replace(/\{(\w+)\}/g, ':$1');
const idOf = (c: { req: { param: (name: string) => string | undefined } }) => c.req.param('topic_id') ?? '';

export function registerTopicRoutes(app: OpenAPIHono<AppEnv>) {
  app.openAPIRegistry.registerPath(create);
  app.post(create.path, async (c) => {
    const body = await readJsonBody(c, BODY_LIMIT);
    return c.json(toTopicResponse(await createTopic(c.var.deps.sql, c.var.projectId, body)), 201);
  });

  app.openapi(list, async (c) => {
    const { limit, starting_after: startingAfter } = c.req.valid('query');
    const { sql } = c.var.deps;
    if (startingAfter) await requireTopic(sql, c.var.projectId, startingAfter).catch(() => {
      throw new ApiError('not_found', 'starting_after does not name a topic of this project.');
    });
    const rows = await q.allTopics(sql, c.var.projectId);
    // A project has few topics; they are paged newest first like every other list.
    const newest = rows.reverse();
    const from = startingAfter ? newest.findIndex((t) => t.id === startingAfter) + 1 : 0;
    return c.json({ data: newest.slice(from, from + limit).map(toTopicResponse), has_more: newest.length > from + limit }, 200);
  });

  app.openapi(get, async (c) => c.json(toTopicResponse(await requireTopic(c.var.deps.sql, c.var.projectId, idOf(c))), 200));

  app.openAPIRegistry.registerPath(update);
  app.patch(pathOf(update), async (c) => {
    const body = await readJsonBody(c, BODY_LIMIT);
    return c.json(toTopicResponse(await updateTopic(c.var.deps.sql, c.var.projectId, idOf(c), body)), 200);
  });

  app.openapi(remove, async (c) => {
    await deleteTopic(c.var.deps.sql, c.var.projectId, idOf(c));
    return c.body(null, 204);
  });
}
