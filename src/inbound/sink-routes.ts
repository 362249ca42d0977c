import { Readable } from 'node:stream';
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { ApiError, ValidationError, errorResponses } from '../http/errors.ts';
import type { AppEnv } from '../http/context.ts';
import { SECURITY } from '../http/security.ts';
import { readBoundedBody } from '../http/body.ts';
import { sha256 } from '../platform/crypto.ts';
import { getProviderConnection } from '../providers/connections.ts';
import { DISABLED_VERDICTS } from './notification.ts';
import { parseReceived } from './parse.ts';
import { isMimeRefusal } from '../platform/mime-pool.ts';
import { newAttachmentId } from './ingest.ts';
import { storeReceived } from './store.ts';
import { getReceived } from './queries.ts';
import { ReceivedEmailSchema, toReceived } from './schemas.ts';
import { linkBase } from './routes.ts';
import { bareAddress } from '../suppressions/address.ts';

const route = createRoute({
  method: 'post',
  path: '/v1/sink/inbound',
  tags: ['sink'],
  summary: 'Receive a message locally',
  description:
    'For a project without an SES connection: the body is a raw message (`Content-Type: message/rfc822`, at most ' +
    '`EMAIL_MAX_MESSAGE_BYTES`), stored as SES would have delivered it (verdicts `disabled`), threaded, and announced with `email.received`.',
  security: SECURITY,
  request: { body: { required: true, content: { 'message/rfc822': { schema: z.string().openapi({ format: 'binary' }) } } } },
  responses: {
    201: { description: 'The received email.', content: { 'application/json': { schema: ReceivedEmailSchema } } },
    ...errorResponses(401, 403, 409, 413, 422, 429),
  },
});

export function registerSinkInboundRoute(app: OpenAPIHono<AppEnv>) {
  app.openAPIRegistry.registerPath(route);
  app.post(route.path, async (c) => {
    const { sql, config } = c.var.deps;
    const projectId = c.var.projectId;
    const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== 'message/rfc822') {
      throw new ValidationError([{ loc: ['header', 'content-type'], msg: 'The body must be a raw message with Content-Type: message/rfc822', type: 'value_error' }]);
    }
    if (await getProviderConnection(sql, config, projectId)) {
      throw new ApiError('permission_denied', 'This project receives through SES; local inbound is for sink projects.');
    }
    const raw = await readBoundedBody(c, config.emailMaxMessageBytes);
    if (!raw.length) throw new ValidationError([{ loc: ['body'], msg: 'The message is empty', type: 'value_error' }]);
    const parsed = await parseReceived(Readable.from([raw]), newAttachmentId).catch((err: unknown) => {
      // Over a parse budget or unreadable (§22.1): the message is at fault, and would be again.
      if (isMimeRefusal(err)) throw new ValidationError([{ loc: ['body'], msg: `The message was not stored: ${err.message}`, type: 'value_error' }]);
      throw err;
    });
    // SES names a message by an id of its own; a local one by its bytes, so a retried post is stored once.
    const sesMessageId = `sink-${sha256(raw).toString('hex')}`;
    const recipients = [...new Set([...parsed.to, ...parsed.cc].map((a) => bareAddress(a).toLowerCase()))];
    const [id] = await storeReceived(sql, [{ projectId, receivedFor: recipients }], {
      sesMessageId, parsed, verdicts: DISABLED_VERDICTS, raw, s3: null, rawSize: raw.length, contentTooLarge: false,
    });
    const row = id ? await getReceived(sql, projectId, id) : await getBySesId(c, sesMessageId);
    if (!row) throw new ApiError('not_found', 'Received email not found.');
    return c.json(toReceived(linkBase(c), row), 201);
  });
}

async function getBySesId(c: { var: AppEnv['Variables'] }, sesMessageId: string) {
  const { sql } = c.var.deps;
  const [hit] = await sql<[{ id: string }?]>`
    select id from received_emails where project_id = ${c.var.projectId} and ses_message_id = ${sesMessageId}`;
  return hit ? getReceived(sql, c.var.projectId, hit.id) : undefined;
}
