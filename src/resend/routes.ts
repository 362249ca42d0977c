import { Hono, type MiddlewareHandler } from 'hono';
import type { SendDeps } from '../emails/service.ts';
import { renderSend } from '../emails/template-send.ts';
import type { AppEnv } from '../http/context.ts';
import { readJsonBody } from '../http/body.ts';
import { ApiError, ValidationError, type ValidationDetail } from '../http/errors.ts';
import { isWellFormedId } from '../platform/ids.ts';
import { sendBatch, sendEmail } from '../emails/service.ts';
import { parseSendRequest, parseIdempotencyKey, ScheduledAt } from '../emails/validate.ts';
import { assertMessageSize } from '../emails/message-size.ts';
import { batchTooLong, MAX_BATCH, readBatchBody } from '../emails/batch.ts';
import { cancelEmail, rescheduleEmail } from '../emails/queries.ts';
import { resendError, toResendError } from './errors.ts';
import { getResendEmail, listResendEmails } from './queries.ts';
import { fromResendEmail, toResendEmail } from './translate.ts';
import { resendPageQuery } from './paging.ts';

/** Bodies beyond twice the message limit plus 1 MiB are refused unread, as on `/v1`. */
const bodyLimit = (maxMessageBytes: number) => 2 * maxMessageBytes + 1024 * 1024;

const emailId = (value: string | undefined) => {
  if (!value || !isWellFormedId('email', value)) throw new ApiError('not_found', 'Email not found.');
  return value;
};

/** One item of a permissive batch checked alone: its 422 as one message, or nothing. */
async function problemOf(item: unknown, index: number, projectId: string, deps: SendDeps) {
  try {
    const send = await renderSend(deps, projectId, parseSendRequest(fromResendEmail(item)));
    await assertMessageSize(send, 'email_check', projectId, deps.config);
    return undefined;
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    return { index, message: err.detail.map((d: ValidationDetail) => `${d.loc.filter((p) => p !== 'body').join('.')}: ${d.msg}`).join('; ') };
  }
}

/**
 * The Resend-compatible API at `/resend`: point the official SDK's `RESEND_BASE_URL` here and use
 * a Mailroom key. Same keys, projects, limits and idempotency as `/v1`; Resend's shapes and errors.
 */
export function createResendApp(auth: MiddlewareHandler<AppEnv>, extend: (app: Hono<AppEnv>) => void = () => {}) {
  const app = new Hono<AppEnv>();
  app.onError((err, c) => toResendError(err, c, (e) => c.var.deps.log.error({ err: e, requestId: c.var.requestId }, 'unhandled error under /resend')));
  app.notFound((c) => resendError(c, 'not_found', 'Route not found.'));
  app.use('*', async (c, next) => {
    if (!c.req.header('authorization')) return resendError(c, 'missing_api_key', 'Missing API key in the authorization header.');
    return auth(c, next);
  });

  // Routes of newer capabilities (templates), wired in by the app so this folder never imports them.
  extend(app);

  app.post('/emails', async (c) => {
    const { config } = c.var.deps;
    const body = await readJsonBody(c, bodyLimit(config.emailMaxMessageBytes));
    const sent = await sendEmail(c.var.deps, c.var.projectId, parseIdempotencyKey(c.req.header('idempotency-key')), fromResendEmail(body));
    return c.json({ id: sent.id }, 200);
  });

  app.post('/emails/batch', async (c) => {
    const { config } = c.var.deps;
    const key = parseIdempotencyKey(c.req.header('idempotency-key'));
    const body = await readBatchBody(c, bodyLimit(config.emailMaxMessageBytes));
    if (!Array.isArray(body)) throw new ValidationError([{ loc: ['body'], msg: 'The body must be a JSON array of emails', type: 'list_type' }]);
    // Checked again after parsing, before either mode validates a single item.
    if (body.length > MAX_BATCH) throw batchTooLong();
    if (c.req.header('x-batch-validation') !== 'permissive') {
      const sent = await sendBatch(c.var.deps, c.var.projectId, key, body.map((item, i) => fromResendEmail(item, `[${i}].`)));
      return c.json({ data: sent.data.map((d) => ({ id: d.id })) }, 200);
    }
    // Permissive: the valid emails are sent, and each invalid one is reported by its index.
    const errors = (await Promise.all(body.map((item, i) => problemOf(item, i, c.var.projectId, c.var.deps)))).filter((e) => e !== undefined);
    const failed = new Set(errors.map((e) => e.index));
    const valid = body.filter((_, i) => !failed.has(i)).map((item) => fromResendEmail(item));
    const data = valid.length ? (await sendBatch(c.var.deps, c.var.projectId, key, valid)).data.map((d) => ({ id: d.id })) : [];
    return c.json({ data, errors }, 200);
  });

  app.get('/emails', async (c) => {
    const { limit, after, before, cursor } = resendPageQuery(c);
    if (cursor !== undefined && !(isWellFormedId('email', cursor) && await getResendEmail(c.var.deps.sql, c.var.projectId, cursor))) {
      throw new ApiError('not_found', 'The cursor does not name an email of this project.');
    }
    const page = await listResendEmails(c.var.deps.sql, c.var.projectId, { limit, after, before });
    return c.json({ object: 'list', has_more: page.hasMore, data: page.rows.map(toResendEmail) }, 200);
  });

  app.get('/emails/:id', async (c) => {
    const row = await getResendEmail(c.var.deps.sql, c.var.projectId, emailId(c.req.param('id')));
    if (!row) throw new ApiError('not_found', 'Email not found.');
    return c.json(toResendEmail(row), 200);
  });

  /** After a reschedule or cancel: Resend's `{object, id}`, or why nothing changed. */
  const changed = async (projectId: string, id: string, result: unknown, sql: AppEnv['Variables']['deps']['sql']) => {
    if (result) return { object: 'email' as const, id };
    const row = await getResendEmail(sql, projectId, id);
    if (!row) throw new ApiError('not_found', 'Email not found.');
    throw new ApiError('email_not_scheduled', `The email is ${row.status}; only a scheduled email can be changed.`);
  };

  app.patch('/emails/:id', async (c) => {
    const id = emailId(c.req.param('id'));
    const body = await readJsonBody(c, 16 * 1024) as { scheduled_at?: unknown };
    const parsed = ScheduledAt.safeParse(body?.scheduled_at);
    if (!parsed.success) throw new ValidationError([{ loc: ['body', 'scheduled_at'], msg: parsed.error.issues[0]?.message ?? 'Invalid scheduled_at', type: 'value_error' }]);
    const result = await rescheduleEmail(c.var.deps.sql, c.var.projectId, id, new Date(parsed.data));
    return c.json(await changed(c.var.projectId, id, result, c.var.deps.sql), 200);
  });

  app.post('/emails/:id/cancel', async (c) => {
    const id = emailId(c.req.param('id'));
    const result = await cancelEmail(c.var.deps.sql, c.var.projectId, id);
    return c.json(await changed(c.var.projectId, id, result, c.var.deps.sql), 200);
  });

  // Mounted with app.route(), this app's notFound is never asked: the parent's answers in
  // Mailroom's shape. The last route catches what no other took, so the SDK reads a Resend error.
  app.all('*', (c) => resendError(c, 'not_found', 'Route not found.'));

  return app;
}
