import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { ApiError, errorResponses } from '../http/errors.ts';
import type { AppEnv } from '../http/context.ts';
import { SECURITY } from '../http/security.ts';
import { readJsonBody } from '../http/body.ts';
import { PAGE_QUERY } from '../http/paging.ts';
import { isWellFormedId } from '../platform/ids.ts';
import * as q from './property-queries.ts';
import {
  CreatePropertyRequest, PropertyList, PropertyResponse, UpdatePropertyRequest, createProperty, deleteProperty, requireProperty, toPropertyResponse, updateProperty,
} from './properties.ts';

const IdParam = z.object({ property_id: z.string().max(100).openapi({ description: 'The property\'s id (`cprop_…`).' }) });
const json = <T extends z.ZodTypeAny>(schema: T) => ({ required: true, content: { 'application/json': { schema } } });
const ok = <T extends z.ZodTypeAny>(description: string, schema: T) => ({ description, content: { 'application/json': { schema } } });
const tags = ['contact-properties'];
const BODY_LIMIT = 16 * 1024;

const create = createRoute({
  method: 'post', path: '/v1/contact-properties', tags, summary: 'Declare a contact property', security: SECURITY,
  description: 'A key (`[A-Za-z0-9_]{1,50}`, unique in the project: else 409 `contact_property_exists`), its type (`string` or `number`, fixed) and an optional `fallback_value` of that type.',
  request: { body: json(CreatePropertyRequest) },
  responses: { 201: ok('The property.', PropertyResponse), ...errorResponses(401, 403, 409, 413, 422, 429) },
});
const list = createRoute({
  method: 'get', path: '/v1/contact-properties', tags, summary: 'List contact properties', security: SECURITY,
  description: 'Newest first, with cursor paging on `starting_after`.',
  request: { query: z.object(PAGE_QUERY) },
  responses: { 200: ok('A page of properties.', PropertyList), ...errorResponses(401, 403, 404, 422, 429) },
});
const get = createRoute({
  method: 'get', path: '/v1/contact-properties/{property_id}', tags, summary: 'Retrieve a contact property', security: SECURITY,
  request: { params: IdParam },
  responses: { 200: ok('The property.', PropertyResponse), ...errorResponses(401, 403, 404, 422, 429) },
});
const update = createRoute({
  method: 'patch', path: '/v1/contact-properties/{property_id}', tags, summary: 'Change a property\'s fallback', security: SECURITY,
  description: 'Only `fallback_value` changes; null removes it.',
  request: { params: IdParam, body: json(UpdatePropertyRequest) },
  responses: { 200: ok('The property.', PropertyResponse), ...errorResponses(401, 403, 404, 413, 422, 429) },
});
const remove = createRoute({
  method: 'delete', path: '/v1/contact-properties/{property_id}', tags, summary: 'Delete a contact property', security: SECURITY,
  description: 'Every contact\'s value for it is removed too.',
  request: { params: IdParam },
  responses: { 204: { description: 'Deleted.' }, ...errorResponses(401, 403, 404, 422, 429) },
});

const pathOf = (route: { path: string }) => route.path.replace(/\{(\w+)\}/g, ':$1');
const idOf = (c: { req: { param: (name: string) => string | undefined } }) => c.req.param('property_id') ?? '';

export function registerContactPropertyRoutes(app: OpenAPIHono<AppEnv>) {
  app.openAPIRegistry.registerPath(create);
  app.post(create.path, async (c) => {
    const body = await readJsonBody(c, BODY_LIMIT);
    return c.json(toPropertyResponse(await createProperty(c.var.deps.sql, c.var.projectId, body)), 201);
  });

  app.openapi(list, async (c) => {
    const { limit, starting_after: startingAfter } = c.req.valid('query');
    const { sql } = c.var.deps;
    if (startingAfter && !(isWellFormedId('contactProperty', startingAfter) && await q.getProperty(sql, c.var.projectId, startingAfter))) {
      throw new ApiError('not_found', 'starting_after does not name a contact property of this project.');
    }
    const page = await q.listProperties(sql, c.var.projectId, { limit, startingAfter });
    return c.json({ data: page.rows.map(toPropertyResponse), has_more: page.hasMore }, 200);
  });

  app.openapi(get, async (c) => c.json(toPropertyResponse(await requireProperty(c.var.deps.sql, c.var.projectId, idOf(c))), 200));

  app.openAPIRegistry.registerPath(update);
  app.patch(pathOf(update), async (c) => {
    const body = await readJsonBody(c, BODY_LIMIT);
    return c.json(toPropertyResponse(await updateProperty(c.var.deps.sql, c.var.projectId, idOf(c), body)), 200);
  });

  app.openapi(remove, async (c) => {
    await deleteProperty(c.var.deps.sql, c.var.projectId, idOf(c));
    return c.body(null, 204);
  });
}
