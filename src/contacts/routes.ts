import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { ApiError, errorResponses } from '../http/errors.ts';
import type { AppEnv } from '../http/context.ts';
import { SECURITY } from '../http/security.ts';
import { readJsonBody } from '../http/body.ts';
import { PAGE_QUERY } from '../http/paging.ts';
import { isWellFormedId } from '../platform/ids.ts';
import { SegmentList, toSegmentResponse } from '../segments/service.ts';
import { listSegments } from '../segments/queries.ts';
import { listContactTopics } from '../topics/queries.ts';
import { getTopic } from '../topics/queries.ts';
import * as q from './queries.ts';
import { ContactList, ContactResponse, CreateContactRequest, TopicChoices, UpdateContactRequest, toContactResponse } from './schemas.ts';
import {
  addContactToSegment, createContact, deleteContact, removeContactFromSegment, requireContact, requireSegment, updateContact, updateContactTopics,
} from './service.ts';

/** A contact's fields and its choices fit well within this; larger bodies answer 413 unread. */
export const BODY_LIMIT = 256 * 1024;

const IdOrEmail = z.string().max(320).openapi({
  description: 'The contact\'s id (`contact_…`) or its email address, case-insensitive; `@` and `+` may be raw or percent-encoded.',
  example: 'ann+news@example.com',
});
const Params = z.object({ id_or_email: IdOrEmail });
const SegmentParams = z.object({ id_or_email: IdOrEmail, segment_id: z.string().max(100) });
const json = <T extends z.ZodTypeAny>(schema: T) => ({ required: true, content: { 'application/json': { schema } } });
const ok = <T extends z.ZodTypeAny>(description: string, schema: T) => ({ description, content: { 'application/json': { schema } } });
const tags = ['contacts'];

const ContactTopic = z.object({
  id: z.string(), name: z.string(), description: z.string().nullable(), subscription: z.enum(['opt_in', 'opt_out']),
}).openapi('ContactTopic');
const ContactTopicList = z.object({ data: z.array(ContactTopic), has_more: z.boolean() }).openapi('ContactTopicList');
const Membership = z.object({ object: z.literal('contact_segment'), contact_id: z.string(), segment_id: z.string(), deleted: z.boolean().optional() }).openapi('ContactSegment');

const create = createRoute({
  method: 'post', path: '/v1/contacts', tags, summary: 'Create a contact', security: SECURITY,
  description:
    'One contact per address in a project (case-insensitive): a second create of an address answers 409 `contact_exists` with the ' +
    'existing `contact_id`. `properties` keys must be declared contact properties and values of their type, else 422 at ' +
    '`["body", "properties", key]`. Fires `contact.created`.',
  request: { body: json(CreateContactRequest) },
  responses: { 201: ok('The contact.', ContactResponse), ...errorResponses(401, 403, 409, 413, 422, 429) },
});

const list = createRoute({
  method: 'get', path: '/v1/contacts', tags, summary: 'List contacts', security: SECURITY,
  description: 'Newest first, with cursor paging on `starting_after`. `segment_id` lists a segment\'s members; `email` finds one address (case-insensitive).',
  request: {
    query: z.object({
      ...PAGE_QUERY,
      segment_id: z.string().max(100).optional().openapi({ description: 'Only the members of this segment.' }),
      // PostgreSQL refuses a NUL in text: refused here as bad input, never a 500.
      email: z.string().max(320).refine((v) => !v.includes('\0'), 'Must not contain a NUL character').optional().openapi({ description: 'Only the contact with this address.' }),
    }),
  },
  responses: { 200: ok('A page of contacts.', ContactList), ...errorResponses(401, 403, 404, 422, 429) },
});

const get = createRoute({
  method: 'get', path: '/v1/contacts/{id_or_email}', tags, summary: 'Retrieve a contact', security: SECURITY,
  request: { params: Params },
  responses: { 200: ok('The contact.', ContactResponse), ...errorResponses(401, 403, 404, 422, 429) },
});

const update = createRoute({
  method: 'patch', path: '/v1/contacts/{id_or_email}', tags, summary: 'Update a contact', security: SECURITY,
  description: 'Fields left out keep their value; a property set to null is cleared. Fires `contact.updated`.',
  request: { params: Params, body: json(UpdateContactRequest) },
  responses: { 200: ok('The contact.', ContactResponse), ...errorResponses(401, 403, 404, 413, 422, 429) },
});

const remove = createRoute({
  method: 'delete', path: '/v1/contacts/{id_or_email}', tags, summary: 'Delete a contact', security: SECURITY,
  description: 'Removes the contact, its memberships and its topic choices. Fires `contact.deleted` with its last state.',
  request: { params: Params },
  responses: { 204: { description: 'Deleted.' }, ...errorResponses(401, 403, 404, 422, 429) },
});

const segments = createRoute({
  method: 'get', path: '/v1/contacts/{id_or_email}/segments', tags, summary: 'List a contact\'s segments', security: SECURITY,
  request: { params: Params, query: z.object(PAGE_QUERY) },
  responses: { 200: ok('A page of segments.', SegmentList), ...errorResponses(401, 403, 404, 422, 429) },
});

const addSegment = createRoute({
  method: 'post', path: '/v1/contacts/{id_or_email}/segments/{segment_id}', tags, summary: 'Add a contact to a segment', security: SECURITY,
  description: 'Adding a member again changes nothing. A change fires `contact.updated`.',
  request: { params: SegmentParams },
  responses: { 200: ok('The membership.', Membership), ...errorResponses(401, 403, 404, 422, 429) },
});

const removeSegment = createRoute({
  method: 'delete', path: '/v1/contacts/{id_or_email}/segments/{segment_id}', tags, summary: 'Take a contact out of a segment', security: SECURITY,
  description: '404 when the contact is not in it. Fires `contact.updated`.',
  request: { params: SegmentParams },
  responses: { 200: ok('The membership, deleted.', Membership), ...errorResponses(401, 403, 404, 422, 429) },
});

const topics = createRoute({
  method: 'get', path: '/v1/contacts/{id_or_email}/topics', tags, summary: 'List a contact\'s topics', security: SECURITY,
  description:
    'Every topic of the project with the contact\'s effective subscription: its own choice, or else the topic\'s `default_subscription` ' +
    '(an `opt_in` topic reaches all but those who opted out; an `opt_out` topic only those who opted in).',
  request: { params: Params, query: z.object(PAGE_QUERY) },
  responses: { 200: ok('A page of topics.', ContactTopicList), ...errorResponses(401, 403, 404, 422, 429) },
});

const updateTopics = createRoute({
  method: 'patch', path: '/v1/contacts/{id_or_email}/topics', tags, summary: 'Set a contact\'s topic choices', security: SECURITY,
  description: 'The body is a bare JSON array of `{id, subscription}`; topics not named keep their choice. A change fires `contact.topics.updated`.',
  request: { params: Params, body: json(TopicChoices) },
  responses: { 200: ok('The contact\'s topics.', ContactTopicList), ...errorResponses(401, 403, 404, 413, 422, 429) },
});

const idOf = (c: Context<AppEnv>) => c.req.param('id_or_email') ?? '';
const pathOf = (route: { path: string }) => route.path.replace(/\{(\w+)\}/g, ':$1');

/** A cursor must name a contact of the project, as the other lists' cursors do. */
async function checkCursor(c: Context<AppEnv>, kind: 'contact' | 'segment' | 'topic', cursor: string | undefined, exists: (id: string) => Promise<unknown>) {
  if (cursor !== undefined && !(isWellFormedId(kind, cursor) && await exists(cursor))) {
    throw new ApiError('not_found', `starting_after does not name a ${kind} of this project.`);
  }
  return c;
}

export function registerContactRoutes(app: OpenAPIHono<AppEnv>) {
  // Bodies are read with a byte bound; the routes above still document them.
  app.openAPIRegistry.registerPath(create);
  app.post(create.path, async (c) => {
    const body = await readJsonBody(c, BODY_LIMIT);
    return c.json(toContactResponse(await createContact(c.var.deps.sql, c.var.projectId, body)), 201);
  });

  app.openapi(list, async (c) => {
    const { limit, starting_after: startingAfter, segment_id: segmentId, email } = c.req.valid('query');
    const { sql } = c.var.deps;
    if (segmentId !== undefined) await requireSegment(sql, c.var.projectId, segmentId);
    await checkCursor(c, 'contact', startingAfter, (id) => q.getContact(sql, c.var.projectId, id));
    const page = await q.listContacts(sql, c.var.projectId, { segmentId, email }, { limit, startingAfter });
    return c.json({ data: page.rows.map(toContactResponse), has_more: page.hasMore }, 200);
  });

  app.openapi(get, async (c) => c.json(toContactResponse(await requireContact(c.var.deps.sql, c.var.projectId, idOf(c))), 200));

  app.openAPIRegistry.registerPath(update);
  app.patch(pathOf(update), async (c) => {
    const body = await readJsonBody(c, BODY_LIMIT);
    return c.json(toContactResponse(await updateContact(c.var.deps.sql, c.var.projectId, idOf(c), body)), 200);
  });

  app.openapi(remove, async (c) => {
    await deleteContact(c.var.deps.sql, c.var.projectId, idOf(c));
    return c.body(null, 204);
  });

  app.openapi(segments, async (c) => {
    const { limit, starting_after: startingAfter } = c.req.valid('query');
    const { sql } = c.var.deps;
    const contact = await requireContact(sql, c.var.projectId, idOf(c));
    await checkCursor(c, 'segment', startingAfter, (id) => requireSegment(sql, c.var.projectId, id).catch(() => undefined));
    const page = await listSegments(sql, c.var.projectId, { limit, startingAfter }, contact.id);
    return c.json({ data: page.rows.map(toSegmentResponse), has_more: page.hasMore }, 200);
  });

  app.openapi(addSegment, async (c) => {
    const { contact, segment } = await addContactToSegment(c.var.deps.sql, c.var.projectId, idOf(c), c.req.param('segment_id') ?? '');
    return c.json({ object: 'contact_segment' as const, contact_id: contact.id, segment_id: segment.id }, 200);
  });

  app.openapi(removeSegment, async (c) => {
    const { contact, segment } = await removeContactFromSegment(c.var.deps.sql, c.var.projectId, idOf(c), c.req.param('segment_id') ?? '');
    return c.json({ object: 'contact_segment' as const, contact_id: contact.id, segment_id: segment.id, deleted: true }, 200);
  });

  const topicPage = async (c: Context<AppEnv>, contactId: string, limit: number, startingAfter?: string) => {
    const { sql } = c.var.deps;
    await checkCursor(c, 'topic', startingAfter, (id) => getTopic(sql, c.var.projectId, id));
    const page = await listContactTopics(sql, c.var.projectId, contactId, { limit, startingAfter });
    return { data: page.rows.map((t) => ({ id: t.id, name: t.name, description: t.description, subscription: t.subscription })), has_more: page.hasMore };
  };

  app.openapi(topics, async (c) => {
    const { limit, starting_after: startingAfter } = c.req.valid('query');
    const contact = await requireContact(c.var.deps.sql, c.var.projectId, idOf(c));
    return c.json(await topicPage(c, contact.id, limit, startingAfter), 200);
  });

  app.openAPIRegistry.registerPath(updateTopics);
  app.patch(pathOf(updateTopics), async (c) => {
    const body = await readJsonBody(c, BODY_LIMIT);
    const contact = await updateContactTopics(c.var.deps.sql, c.var.projectId, idOf(c), body);
    return c.json(await topicPage(c, contact.id, 100), 200);
  });
}
