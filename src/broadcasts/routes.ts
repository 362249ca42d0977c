import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { ApiError, errorResponses } from '../http/errors.ts';
import type { AppEnv } from '../http/context.ts';
import { SECURITY } from '../http/security.ts';
import { readJsonBody } from '../http/body.ts';
import { PAGE_QUERY } from '../http/paging.ts';
import { isWellFormedId } from '../platform/ids.ts';
import * as q from './queries.ts';
import { RECIPIENT_TYPES } from './queries.ts';
import {
  BroadcastList, BroadcastResponse, ClickedLinkList, CreateBroadcastRequest, RecipientList, SendBroadcastRequest,
  UpdateBroadcastRequest, toBroadcastResponse,
} from './schemas.ts';
import { cancelBroadcast, createBroadcast, deleteBroadcast, duplicateBroadcast, requireBroadcast, sendBroadcast, updateBroadcast, templatesFor } from './service.ts';

/** html and text of up to 2 MiB each, JSON-escaped. */
const BODY_LIMIT = 10 * 1024 * 1024;

const IdParam = z.object({ broadcast_id: z.string().max(100).openapi({ description: 'The broadcast\'s id (`bc_…`).' }) });
const json = <T extends z.ZodTypeAny>(schema: T) => ({ required: true, content: { 'application/json': { schema } } });
const ok = <T extends z.ZodTypeAny>(description: string, schema: T) => ({ description, content: { 'application/json': { schema } } });
const base = { tags: ['broadcasts'], security: SECURITY };

const create = createRoute({
  ...base, method: 'post', path: '/v1/broadcasts', summary: 'Create a broadcast',
  description: 'A `draft` to a segment\'s contacts, optionally under a topic. `subject`, `html` and `text` take the placeholders ' +
    '`{{{contact.first_name|there}}}`, `{{{contact.<property>|fallback}}}`, `{{{FIRST_NAME|there}}}`, `{{{EMAIL}}}` and `{{{RESEND_UNSUBSCRIBE_URL}}}`. ' +
    'Instead of `html` and `text`, `template` names a published template (§14) and its variables.',
  request: { body: json(CreateBroadcastRequest) },
  responses: { 201: ok('The broadcast.', BroadcastResponse), ...errorResponses(401, 403, 413, 422, 429) },
});
const list = createRoute({
  ...base, method: 'get', path: '/v1/broadcasts', summary: 'List broadcasts',
  description: 'Newest first, with cursor paging on `starting_after`. Items omit `html` and `text`.',
  request: { query: z.object({ ...PAGE_QUERY }) },
  responses: { 200: ok('A page of broadcasts.', BroadcastList), ...errorResponses(401, 403, 404, 422, 429) },
});
const get = createRoute({
  ...base, method: 'get', path: '/v1/broadcasts/{broadcast_id}', summary: 'Get a broadcast',
  description: 'With `counts`, read in one grouped query over the broadcast\'s emails.',
  request: { params: IdParam },
  responses: { 200: ok('The broadcast.', BroadcastResponse), ...errorResponses(401, 403, 404, 422, 429) },
});
const update = createRoute({
  ...base, method: 'patch', path: '/v1/broadcasts/{broadcast_id}', summary: 'Update a broadcast',
  description: 'Only a `draft` or `scheduled` broadcast; otherwise 409 `broadcast_not_editable`.',
  request: { params: IdParam, body: json(UpdateBroadcastRequest) },
  responses: { 200: ok('The broadcast.', BroadcastResponse), ...errorResponses(401, 403, 404, 409, 413, 422, 429) },
});
const remove = createRoute({
  ...base, method: 'delete', path: '/v1/broadcasts/{broadcast_id}', summary: 'Delete a broadcast',
  description: 'Only a `draft` or `scheduled` broadcast; otherwise 409 `broadcast_not_editable`.',
  request: { params: IdParam },
  responses: { 204: { description: 'Deleted.' }, ...errorResponses(401, 403, 404, 409, 422, 429) },
});
const send = createRoute({
  ...base, method: 'post', path: '/v1/broadcasts/{broadcast_id}/send', summary: 'Send a broadcast',
  description: 'Now (`sending` at once; its recipients are the segment\'s members at this moment) or at `scheduled_at` ' +
    '(ISO 8601 or natural language, at most 30 days ahead; recipients are fixed when it falls due). Needs PUBLIC_BASE_URL.',
  request: { params: IdParam, body: { required: false, content: { 'application/json': { schema: SendBroadcastRequest } } } },
  responses: { 200: ok('The broadcast.', BroadcastResponse), ...errorResponses(401, 403, 404, 409, 422, 429) },
});
const cancel = createRoute({
  ...base, method: 'post', path: '/v1/broadcasts/{broadcast_id}/cancel', summary: 'Cancel a broadcast',
  description: 'A `sending` broadcast stops (`canceled`; its copies not yet sent are canceled); a `scheduled` one goes back to `draft`.',
  request: { params: IdParam },
  responses: { 200: ok('The broadcast.', BroadcastResponse), ...errorResponses(401, 403, 404, 409, 422, 429) },
});
const duplicate = createRoute({
  ...base, method: 'post', path: '/v1/broadcasts/{broadcast_id}/duplicate', summary: 'Duplicate a broadcast',
  description: 'A new `draft` with the same content, segment and topic.',
  request: { params: IdParam },
  responses: { 201: ok('The copy.', BroadcastResponse), ...errorResponses(401, 403, 404, 422, 429) },
});
const recipients = createRoute({
  ...base, method: 'get', path: '/v1/broadcasts/{broadcast_id}/recipients', summary: 'List a broadcast\'s recipients',
  description: 'The contacts of one kind, in contact id order, paged on `starting_after` (a contact id).',
  request: { params: IdParam, query: z.object({ ...PAGE_QUERY, type: z.enum(RECIPIENT_TYPES).default('sent') }) },
  responses: { 200: ok('A page of recipients.', RecipientList), ...errorResponses(401, 403, 404, 422, 429) },
});
const links = createRoute({
  ...base, method: 'get', path: '/v1/broadcasts/{broadcast_id}/clicked-links', summary: 'A broadcast\'s clicked links',
  description: 'Each tracked link clicked in the broadcast\'s emails, with its clicks and unique clicks (by email).',
  request: { params: IdParam },
  responses: { 200: ok('The links.', ClickedLinkList), ...errorResponses(401, 403, 404, 422, 429) },
});

const idOf = (c: Context<AppEnv>) => c.req.param('broadcast_id')!;
const pathOf = (route: { path: string }) => route.path.replace('{broadcast_id}', ':broadcast_id');

export function registerBroadcastRoutes(app: OpenAPIHono<AppEnv>) {
  app.openAPIRegistry.registerPath(create);
  app.post(create.path, async (c) => {
    const body = await readJsonBody(c, BODY_LIMIT);
    return c.json(toBroadcastResponse(await createBroadcast(c.var.deps.sql, c.var.projectId, body, templatesFor(c.var.deps))), 201);
  });

  app.openapi(list, async (c) => {
    const { limit, starting_after: startingAfter } = c.req.valid('query');
    const { sql } = c.var.deps;
    if (startingAfter && !(isWellFormedId('broadcast', startingAfter) && await q.getBroadcast(sql, c.var.projectId, startingAfter))) {
      throw new ApiError('not_found', 'starting_after does not name a broadcast of this project.');
    }
    const page = await q.listBroadcasts(sql, c.var.projectId, { limit, startingAfter });
    return c.json({ data: page.rows.map((b) => toBroadcastResponse(b, undefined, false)), has_more: page.hasMore }, 200);
  });

  app.openapi(get, async (c) => {
    const { sql } = c.var.deps;
    const b = await requireBroadcast(sql, c.var.projectId, idOf(c));
    return c.json(toBroadcastResponse(b, await q.broadcastCounts(sql, b)), 200);
  });

  app.openAPIRegistry.registerPath(update);
  app.patch(pathOf(update), async (c) => {
    const body = await readJsonBody(c, BODY_LIMIT);
    return c.json(toBroadcastResponse(await updateBroadcast(c.var.deps.sql, c.var.projectId, idOf(c), body, templatesFor(c.var.deps))), 200);
  });

  app.openapi(remove, async (c) => {
    await deleteBroadcast(c.var.deps.sql, c.var.projectId, idOf(c));
    return c.body(null, 204);
  });

  app.openAPIRegistry.registerPath(send);
  app.post(pathOf(send), async (c) => {
    const body = await readJsonBody(c, 64 * 1024).catch(() => ({}));
    const { config, sql } = c.var.deps;
    return c.json(toBroadcastResponse(await sendBroadcast(config, sql, c.var.projectId, idOf(c), body)), 200);
  });

  app.openapi(cancel, async (c) => c.json(toBroadcastResponse(await cancelBroadcast(c.var.deps.sql, c.var.projectId, idOf(c))), 200));

  app.openapi(duplicate, async (c) => c.json(toBroadcastResponse(await duplicateBroadcast(c.var.deps.sql, c.var.projectId, idOf(c))), 201));

  app.openapi(recipients, async (c) => {
    const { sql } = c.var.deps;
    const { limit, starting_after: startingAfter, type } = c.req.valid('query');
    const b = await requireBroadcast(sql, c.var.projectId, idOf(c));
    const page = await q.listRecipients(sql, b, type, { limit, startingAfter });
    return c.json({ data: page.rows.map((r) => ({ contact_id: r.contactId, email: r.email, email_id: r.emailId })), has_more: page.hasMore }, 200);
  });

  app.openapi(links, async (c) => {
    const { sql } = c.var.deps;
    const b = await requireBroadcast(sql, c.var.projectId, idOf(c));
    const rows = await q.clickedLinks(sql, b);
    return c.json({ data: rows.map((r) => ({ url: r.url, clicks: r.clicks, unique_clicks: r.uniqueClicks })) }, 200);
  });
}
