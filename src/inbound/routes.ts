import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { ApiError, errorResponses, requireId } from '../http/errors.ts';
import type { AppEnv } from '../http/context.ts';
import { SECURITY } from '../http/security.ts';
import { isWellFormedId } from '../platform/ids.ts';
import { getReceived, listReceived, receivedExists } from './queries.ts';
import { AttachmentLinkSchema, ReceivedEmailList, ReceivedEmailSchema, toAttachmentLink, toReceived, type LinkBase } from './schemas.ts';
import { PAGE_QUERY } from '../http/paging.ts';

/** Links are made for PUBLIC_BASE_URL, else for the address the caller used. */
export function linkBase(c: Context<AppEnv>): LinkBase {
  const { config } = c.var.deps;
  return { secretKey: config.secretKey, baseUrl: config.publicBaseUrl ?? new URL(c.req.url).origin };
}

export async function requireReceived(c: Context<AppEnv>, id: string) {
  const receivedId = requireId('received', id, 'Received email not found.');
  const row = await getReceived(c.var.deps.sql, c.var.projectId, receivedId);
  if (!row) throw new ApiError('not_found', 'Received email not found.');
  return row;
}

const IdParam = z.object({ id: z.string().max(100) });

const list = createRoute({
  method: 'get',
  path: '/v1/emails/receiving',
  tags: ['receiving'],
  summary: 'List received emails',
  description: 'The project\'s received emails, newest first, with cursor paging on `starting_after`.',
  security: SECURITY,
  request: {
    query: z.object({
      ...PAGE_QUERY,
    }),
  },
  responses: {
    200: { description: 'A page of received emails.', content: { 'application/json': { schema: ReceivedEmailList } } },
    ...errorResponses(401, 403, 404, 422, 429),
  },
});

const get = createRoute({
  method: 'get',
  path: '/v1/emails/receiving/{id}',
  tags: ['receiving'],
  summary: 'Retrieve a received email',
  description: 'The message parsed, with its verdicts, thread and a link to its raw source that works for one hour without a key.',
  security: SECURITY,
  request: { params: IdParam },
  responses: {
    200: { description: 'The received email.', content: { 'application/json': { schema: ReceivedEmailSchema } } },
    ...errorResponses(401, 403, 404, 422, 429),
  },
});

const listAttachments = createRoute({
  method: 'get',
  path: '/v1/emails/receiving/{id}/attachments',
  tags: ['receiving'],
  summary: 'A received email\'s attachments',
  description: 'Each with a `download_url` that works for one hour without a key (null when the virus verdict is `fail`).',
  security: SECURITY,
  request: { params: IdParam },
  responses: {
    200: { description: 'The attachments.', content: { 'application/json': { schema: z.object({ data: z.array(AttachmentLinkSchema) }).openapi('ReceivedAttachmentList') } } },
    ...errorResponses(401, 403, 404, 422, 429),
  },
});

const getAttachment = createRoute({
  method: 'get',
  path: '/v1/emails/receiving/{id}/attachments/{attachment_id}',
  tags: ['receiving'],
  summary: 'One attachment of a received email',
  security: SECURITY,
  request: { params: z.object({ id: z.string().max(100), attachment_id: z.string().max(100) }) },
  responses: {
    200: { description: 'The attachment.', content: { 'application/json': { schema: AttachmentLinkSchema } } },
    ...errorResponses(401, 403, 404, 422, 429),
  },
});

/** Registered before the emails' `/v1/emails/{email_id}`, which would take `receiving` for an id. */
export function registerReceivingRoutes(app: OpenAPIHono<AppEnv>) {
  app.openapi(list, async (c) => {
    const { limit, starting_after: startingAfter } = c.req.valid('query');
    const { sql } = c.var.deps;
    if (startingAfter && !(isWellFormedId('received', startingAfter) && await receivedExists(sql, c.var.projectId, startingAfter))) {
      throw new ApiError('not_found', 'starting_after does not name a received email of this project.');
    }
    const page = await listReceived(sql, c.var.projectId, { limit, startingAfter });
    const base = linkBase(c);
    return c.json({ data: page.rows.map((r) => toReceived(base, r)), has_more: page.hasMore }, 200);
  });

  app.openapi(get, async (c) => {
    const row = await requireReceived(c, c.req.valid('param').id);
    return c.json(toReceived(linkBase(c), row), 200);
  });

  app.openapi(listAttachments, async (c) => {
    const row = await requireReceived(c, c.req.valid('param').id);
    const base = linkBase(c);
    return c.json({ data: row.attachments.map((a) => toAttachmentLink(base, row, a)) }, 200);
  });

  app.openapi(getAttachment, async (c) => {
    const { id, attachment_id: attachmentId } = c.req.valid('param');
    const row = await requireReceived(c, id);
    const attachment = row.attachments.find((a) => a.id === attachmentId);
    if (!attachment) throw new ApiError('not_found', 'Attachment not found.');
    return c.json(toAttachmentLink(linkBase(c), row, attachment), 200);
  });
}
