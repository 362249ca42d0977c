import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { ApiError, ValidationError, errorResponses, requireId, validationErrorFromZod } from '../http/errors.ts';
import { storedAddress } from '../suppressions/address.ts';
import type { Context } from 'hono';
import { isWellFormedId } from '../platform/ids.ts';
import type { AppEnv } from '../http/context.ts';
import { SECURITY } from '../http/security.ts';
import { readJsonBody } from '../http/body.ts';
import { EMAIL_STATUSES, EmailList, EmailResponse, toEmailListItem, toEmailResponse } from './schemas.ts';
import * as q from './queries.ts';
import { IdempotencyHeaders, ScheduledAt, SendEmailRequest, SendEmailResponse, TAG_FILTER, parseIdempotencyKey, parseTagFilter } from './validate.ts';
import { MAX_BATCH, readBatchBody } from './batch.ts';
import { sendBatch as sendEmails, sendEmail } from './service.ts';
import { listEventsOfEmail } from '../events/queries.ts';
import { repliesTo } from '../inbound/queries.ts';
import { PAGE_QUERY } from '../http/paging.ts';

const sendEmailRoute = createRoute({
  method: 'post',
  path: '/v1/emails',
  tags: ['emails'],
  summary: 'Send an email',
  description:
    'Validates and records the message, then answers `queued`; a background worker sends it. ' +
    'The assembled message (attachments base64-encoded) may be at most `EMAIL_MAX_MESSAGE_BYTES`. ' +
    'A repeat with the same `Idempotency-Key` and body within 24 h answers the first id with ' +
    '`Idempotent-Replayed: true`; the same key with another body answers 409.',
  security: SECURITY,
  request: {
    headers: IdempotencyHeaders,
    body: { required: true, content: { 'application/json': { schema: SendEmailRequest } } },
  },
  responses: {
    201: {
      description: 'Accepted and queued (or the replay of an earlier send with the same Idempotency-Key).',
      headers: { 'Idempotent-Replayed': { description: '`true` when this answers a repeat.', schema: { type: 'string', enum: ['true'] } } },
      content: { 'application/json': { schema: SendEmailResponse } },
    },
    ...errorResponses(401, 409, 413, 422, 429),
  },
});

/** Bodies beyond twice the message limit plus 1 MiB are refused unread: base64 and JSON escaping leave room. */
const bodyLimit = (maxMessageBytes: number) => 2 * maxMessageBytes + 1024 * 1024;

const listEmails = createRoute({
  method: 'get',
  path: '/v1/emails',
  tags: ['emails'],
  summary: 'List emails',
  description:
    'The project\'s emails, newest first, with cursor paging on `starting_after`. `to` finds the emails that had an ' +
    'address in `to`, `cc` or `bcc` (exact, case-insensitive); it combines with `status` and `tag`. A broadcast\'s emails ' +
    'are listed only with `broadcast_id`.',
  security: SECURITY,
  request: {
    query: z.object({
      ...PAGE_QUERY,
      status: z.enum(EMAIL_STATUSES).optional(),
      tag: z.string().max(600).regex(TAG_FILTER, 'tag is name:value').optional()
        .openapi({ description: 'Only emails carrying this tag, as `name:value`.' }),
      to: z.string().max(320).optional()
        .openapi({ description: 'Only emails sent to this address, in `to`, `cc` or `bcc`; a bare address such as `ann@example.net`, any case.', example: 'ann@example.net' }),
      broadcast_id: z.string().max(100).optional()
        .openapi({ description: 'Only the emails of this broadcast; without it, broadcasts\' emails are left out.' }),
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

const EmailEvent = z
  .object({
    id: z.string().openapi({ example: 'evt_01JD3Z8K6Q5W0R1S2T3V4X5Y6Z' }),
    type: z.string().openapi({ example: 'email.delivered' }),
    created_at: z.string().datetime(),
    data: z.record(z.string(), z.unknown()),
  })
  .openapi('EmailEvent');

const listEvents = createRoute({
  method: 'get',
  path: '/v1/emails/{email_id}/events',
  tags: ['emails'],
  summary: 'An email\'s events',
  description: 'What happened to the email, oldest first: the same events its webhooks receive.',
  security: SECURITY,
  request: { params: z.object({ email_id: z.string().max(100) }) },
  responses: {
    200: { description: 'The timeline.', content: { 'application/json': { schema: z.object({ data: z.array(EmailEvent) }).openapi('EmailEventList') } } },
    ...errorResponses(401, 404, 422, 429),
  },
});

const EmailIdParam = z.object({ email_id: z.string().max(100) });

const BatchResponse = z
  .object({ data: z.array(SendEmailResponse) })
  .openapi('BatchSendResponse');

const sendBatchRoute = createRoute({
  method: 'post',
  path: '/v1/emails/batch',
  tags: ['emails'],
  summary: 'Send a batch',
  description:
    `Up to ${MAX_BATCH} send requests in one JSON array, validated all or nothing (a 422 \`loc\` starts with ` +
    '`["body", i]`) and recorded in one transaction. Answers the ids in request order. An `Idempotency-Key` covers the whole batch.',
  security: SECURITY,
  request: {
    headers: IdempotencyHeaders,
    body: { required: true, content: { 'application/json': { schema: z.array(SendEmailRequest).min(1).max(MAX_BATCH) } } },
  },
  responses: {
    201: { description: 'Every email accepted.', content: { 'application/json': { schema: BatchResponse } } },
    ...errorResponses(401, 409, 413, 422, 429),
  },
});

/** What a `sending` key gets back from a change: never the email's addresses or content. */
const EmailChange = z
  .object({
    id: z.string(),
    status: z.enum(EMAIL_STATUSES),
    scheduled_at: z.string().nullable(),
  })
  .openapi('EmailChange', { description: 'The answer to a `sending` key: the id, status and schedule only.' });

const ChangedEmail = z.union([EmailResponse, EmailChange]);

const reschedule = createRoute({
  method: 'patch',
  path: '/v1/emails/{email_id}',
  tags: ['emails'],
  summary: 'Reschedule an email',
  description: 'Moves a `scheduled` email to a new `scheduled_at` (a time not in the future sends it now). Any other status answers 409 `email_not_scheduled`.',
  security: SECURITY,
  request: {
    params: EmailIdParam,
    body: { required: true, content: { 'application/json': { schema: z.object({ scheduled_at: ScheduledAt }).openapi('RescheduleRequest') } } },
  },
  responses: {
    200: { description: 'The email, rescheduled: in full to a `full` key, as `EmailChange` to a `sending` key.', content: { 'application/json': { schema: ChangedEmail } } },
    ...errorResponses(401, 404, 409, 413, 422, 429),
  },
});

const cancel = createRoute({
  method: 'post',
  path: '/v1/emails/{email_id}/cancel',
  tags: ['emails'],
  summary: 'Cancel a scheduled email',
  description: 'A `scheduled` email becomes `canceled` and is never sent. Any other status answers 409 `email_not_scheduled`.',
  security: SECURITY,
  request: { params: EmailIdParam },
  responses: {
    200: { description: 'The email, canceled: in full to a `full` key, as `EmailChange` to a `sending` key.', content: { 'application/json': { schema: ChangedEmail } } },
    ...errorResponses(401, 404, 409, 422, 429),
  },
});

/** The email after a change, or the 404/409 that explains why there was none. */
async function afterChange(c: Context<AppEnv>, emailId: string, changed: unknown) {
  const row = await q.getEmail(c.var.deps.sql, c.var.projectId, emailId);
  if (!row) throw new ApiError('not_found', 'Email not found.');
  if (!changed) throw new ApiError('email_not_scheduled', `The email is ${row.status}; only a scheduled email can be changed.`);
  // A sending key may move and cancel what it sent, but reads nothing of it.
  if (c.var.keyPermission !== 'full') return c.json({ id: row.id, status: row.status, scheduled_at: row.scheduledAt?.toISOString() ?? null }, 200);
  return c.json(toEmailResponse(row), 200);
}

export function registerEmailRoutes(app: OpenAPIHono<AppEnv>) {
  // The body is read here with a byte bound rather than by the route's json validator, which
  // would buffer any size; the createRoute above still documents the request and its answers.
  app.openAPIRegistry.registerPath(sendEmailRoute);
  app.post(sendEmailRoute.path, async (c) => {
    const { config } = c.var.deps;
    const key = parseIdempotencyKey(c.req.header('idempotency-key'));
    const body = await readJsonBody(c, bodyLimit(config.emailMaxMessageBytes));
    const sent = await sendEmail(c.var.deps, c.var.projectId, key, body);
    if (sent.replayed) c.header('Idempotent-Replayed', 'true');
    return c.json({ id: sent.id, status: sent.status }, 201);
  });

  app.openapi(listEmails, async (c) => {
    const { limit, starting_after: startingAfter, status, tag: tagFilter, to: toFilter, broadcast_id: broadcastId } = c.req.valid('query');
    const tag = tagFilter ? parseTagFilter(tagFilter) : undefined;
    const to = toFilter === undefined ? undefined : storedAddress(toFilter);
    if (toFilter !== undefined && !to) throw new ValidationError([{ loc: ['query', 'to'], msg: 'Not an email address', type: 'value_error', input: toFilter }]);
    const projectId = c.var.projectId;
    const sql = c.var.deps.sql;
    if (startingAfter && !(isWellFormedId('email', startingAfter) && await q.emailExists(sql, projectId, startingAfter))) {
      throw new ApiError('not_found', 'starting_after does not name an email of this project.');
    }
    if (broadcastId !== undefined && !isWellFormedId('broadcast', broadcastId)) throw new ApiError('not_found', 'broadcast_id does not name a broadcast of this project.');
    const page = await q.listEmails(c.var.deps.historySql ?? sql, projectId, { limit, startingAfter, status, tag, to, broadcastId });
    return c.json({ data: page.rows.map(toEmailListItem), has_more: page.hasMore }, 200);
  });

  app.openAPIRegistry.registerPath(sendBatchRoute);
  app.post(sendBatchRoute.path, async (c) => {
    const key = parseIdempotencyKey(c.req.header('idempotency-key'));
    const body = await readBatchBody(c, bodyLimit(c.var.deps.config.emailMaxMessageBytes));
    const sent = await sendEmails(c.var.deps, c.var.projectId, key, body);
    if (sent.replayed) c.header('Idempotent-Replayed', 'true');
    return c.json({ data: sent.data }, 201);
  });

  app.openAPIRegistry.registerPath(reschedule);
  app.patch(reschedule.path.replace('{email_id}', ':email_id'), async (c) => {
    const emailId = requireId('email', c.req.param('email_id') ?? '', 'Email not found.');
    const body = await readJsonBody(c, 16 * 1024);
    const parsed = z.object({ scheduled_at: ScheduledAt }).safeParse(body);
    if (!parsed.success) throw validationErrorFromZod(parsed.error, 'json');
    const changed = await q.rescheduleEmail(c.var.deps.sql, c.var.projectId, emailId, new Date(parsed.data.scheduled_at));
    return afterChange(c, emailId, changed);
  });

  app.openapi(cancel, async (c) => {
    const emailId = requireId('email', c.req.valid('param').email_id, 'Email not found.');
    return afterChange(c, emailId, await q.cancelEmail(c.var.deps.sql, c.var.projectId, emailId));
  });

  app.openapi(listEvents, async (c) => {
    const emailId = requireId('email', c.req.valid('param').email_id, 'Email not found.');
    const { sql } = c.var.deps;
    if (!(await q.emailExists(sql, c.var.projectId, emailId))) throw new ApiError('not_found', 'Email not found.');
    const rows = await listEventsOfEmail(sql, c.var.projectId, emailId);
    return c.json({ data: rows.map((e) => ({ id: e.id, type: e.type, created_at: e.createdAt.toISOString(), data: e.data })) }, 200);
  });

  app.openapi(getEmail, async (c) => {
    const emailId = requireId('email', c.req.valid('param').email_id, 'Email not found.');
    const row = await q.getEmail(c.var.deps.sql, c.var.projectId, emailId);
    if (!row) throw new ApiError('not_found', 'Email not found.');
    return c.json({ ...toEmailResponse(row), replies: await repliesTo(c.var.deps.sql, c.var.projectId, emailId) }, 200);
  });
}
