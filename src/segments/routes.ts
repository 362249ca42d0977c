import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { ApiError, errorResponses } from '../http/errors.ts';
import type { AppEnv } from '../http/context.ts';
import { SECURITY } from '../http/security.ts';
import { readJsonBody } from '../http/body.ts';
import { PAGE_QUERY } from '../http/paging.ts';
import { isWellFormedId } from '../platform/ids.ts';
import { requireSegment } from '../contacts/service.ts';
import { ContactList, toContactResponse } from '../contacts/schemas.ts';
import { getContact, listContacts } from '../contacts/queries.ts';
import * as q from './queries.ts';
import { SegmentList, SegmentRequest, SegmentResponse, createSegment, deleteSegment, renameSegment, toSegmentResponse } from './service.ts';

const IdParam = z.object({ segment_id: z.string().max(100).openapi({ description: 'The segment\'s id (`seg_…`).' }) });
const json = <T extends z.ZodTypeAny>(schema: T) => ({ required: true, content: { 'application/json': { schema } } });
const ok = <T extends z.ZodTypeAny>(description: string, schema: T) => ({ description, content: { 'application/json': { schema } } });
const tags = ['segments'];
const BODY_LIMIT = 16 * 1024;

const create = createRoute({
  method: 'post', path: '/v1/segments', tags, summary: 'Create a segment', security: SECURITY,
  request: { body: json(SegmentRequest) },
  responses: { 201: ok('The segment.', SegmentResponse), ...errorResponses(401, 403, 413, 422, 429) },
});
const list = createRoute({
  method: 'get', path: '/v1/segments', tags, summary: 'List segments', security: SECURITY,
  description: 'Newest first, with cursor paging on `starting_after`.',
  request: { query: z.object(PAGE_QUERY) },
  responses: { 200: ok('A page of segments.', SegmentList), ...errorResponses(401, 403, 404, 422, 429) },
});
const get = createRoute({
  method: 'get', path: '/v1/segments/{segment_id}', tags, summary: 'Retrieve a segment', security: SECURITY,
  request: { params: IdParam },
  responses: { 200: ok('The segment.', SegmentResponse), ...errorResponses(401, 403, 404, 422, 429) },
});
const update = createRoute({
  method: 'patch', path: '/v1/segments/{segment_id}', tags, summary: 'Rename a segment', security: SECURITY,
  request: { params: IdParam, body: json(SegmentRequest) },
  responses: { 200: ok('The segment.', SegmentResponse), ...errorResponses(401, 403, 404, 413, 422, 429) },
});
const remove = createRoute({
  method: 'delete', path: '/v1/segments/{segment_id}', tags, summary: 'Delete a segment', security: SECURITY,
  description: 'Its contacts stay, out of it. No contact.* event is fired for them.',
  request: { params: IdParam },
  responses: { 204: { description: 'Deleted.' }, ...errorResponses(401, 403, 404, 422, 429) },
});
const contacts = createRoute({
  method: 'get', path: '/v1/segments/{segment_id}/contacts', tags, summary: 'List a segment\'s contacts', security: SECURITY,
  description: 'The same as `GET /v1/contacts?segment_id=`.',
  request: { params: IdParam, query: z.object(PAGE_QUERY) },
  responses: { 200: ok('A page of contacts.', ContactList), ...errorResponses(401, 403, 404, 422, 429) },
});

const pathOf = (route: { path: string }) => route.path.replace(/\{(\w+)\}/g, ':$1');

export function registerSegmentRoutes(app: OpenAPIHono<AppEnv>) {
  app.openAPIRegistry.registerPath(create);
  app.post(create.path, async (c) => {
    const body = await readJsonBody(c, BODY_LIMIT);
    return c.json(toSegmentResponse(await createSegment(c.var.deps.sql, c.var.projectId, body)), 201);
  });

  app.openapi(list, async (c) => {
    const { limit, starting_after: startingAfter } = c.req.valid('query');
    const { sql } = c.var.deps;
    if (startingAfter && !(isWellFormedId('segment', startingAfter) && await q.getSegment(sql, c.var.projectId, startingAfter))) {
      throw new ApiError('not_found', 'starting_after does not name a segment of this project.');
    }
    const page = await q.listSegments(sql, c.var.projectId, { limit, startingAfter });
    return c.json({ data: page.rows.map(toSegmentResponse), has_more: page.hasMore }, 200);
  });

  app.openapi(get, async (c) => c.json(toSegmentResponse(await requireSegment(c.var.deps.sql, c.var.projectId, c.req.param('segment_id') ?? '')), 200));

  app.openAPIRegistry.registerPath(update);
  app.patch(pathOf(update), async (c) => {
    const body = await readJsonBody(c, BODY_LIMIT);
    return c.json(toSegmentResponse(await renameSegment(c.var.deps.sql, c.var.projectId, c.req.param('segment_id') ?? '', body)), 200);
  });

  app.openapi(remove, async (c) => {
    await deleteSegment(c.var.deps.sql, c.var.projectId, c.req.param('segment_id') ?? '');
    return c.body(null, 204);
  });

  app.openapi(contacts, async (c) => {
    const { limit, starting_after: startingAfter } = c.req.valid('query');
    const { sql } = c.var.deps;
    const segment = await requireSegment(sql, c.var.projectId, c.req.param('segment_id') ?? '');
    if (startingAfter && !(isWellFormedId('contact', startingAfter) && await getContact(sql, c.var.projectId, startingAfter))) {
      throw new ApiError('not_found', 'starting_after does not name a contact of this project.');
    }
    const page = await listContacts(sql, c.var.projectId, { segmentId: segment.id }, { limit, startingAfter });
    return c.json({ data: page.rows.map(toContactResponse), has_more: page.hasMore }, 200);
  });
}
