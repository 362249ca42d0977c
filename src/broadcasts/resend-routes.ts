import type { Context, Hono } from 'hono';
import type { AppEnv } from '../http/context.ts';
import { readJsonBody } from '../http/body.ts';
import { ApiError, ValidationError } from '../http/errors.ts';
import { isWellFormedId } from '../platform/ids.ts';
import { resendPageQuery } from '../resend/paging.ts';
import * as q from './queries.ts';
import { RECIPIENT_TYPES, type BroadcastRow, type RecipientType } from './queries.ts';
import { cancelBroadcast, createBroadcast, deleteBroadcast, duplicateBroadcast, requireBroadcast, sendBroadcast, templatesFor, updateBroadcast } from './service.ts';

/**
 * `resend.broadcasts.*` at `/resend/broadcasts`: the same broadcasts as `/v1/broadcasts`, in
 * Resend's shapes (read from the SDK's types). Errors take Resend's shape from the `/resend` app.
 */

const BODY_LIMIT = 10 * 1024 * 1024;

/** Resend knows three states: a canceled schedule is a draft again, a canceled send has sent. */
export function resendStatus(b: BroadcastRow): 'draft' | 'queued' | 'sent' {
  if (b.status === 'draft') return 'draft';
  if (b.status === 'scheduled' || b.status === 'sending') return 'queued';
  if (b.status === 'canceled') return b.canceledFrom === 'scheduled' ? 'draft' : 'sent';
  return 'sent';
}

function listItem(b: BroadcastRow) {
  return {
    id: b.id,
    name: b.name,
    audience_id: b.segmentId,
    segment_id: b.segmentId,
    status: resendStatus(b),
    created_at: b.createdAt.toISOString(),
    scheduled_at: b.scheduledAt?.toISOString() ?? null,
    sent_at: b.sentAt?.toISOString() ?? null,
  };
}

function toResendBroadcast(b: BroadcastRow) {
  return {
    object: 'broadcast' as const,
    ...listItem(b),
    from: b.fromAddress,
    subject: b.subject,
    reply_to: b.replyToAddresses.length ? b.replyToAddresses : null,
    preview_text: b.previewText,
    topic_id: b.topicId,
    html: b.html,
    text: b.text,
  };
}

/** Resend's body in Mailroom's: `audience_id` is the older name of `segment_id`; `send` and `scheduled_at` are taken apart. */
function fromResend(body: unknown, creating: boolean) {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ValidationError([{ loc: ['body'], msg: 'Expected a JSON object', type: 'object_type' }]);
  }
  const { audience_id: audienceId, send, scheduled_at: scheduledAt, ...rest } = body as Record<string, unknown>;
  const out: Record<string, unknown> = { ...rest };
  if (out.segment_id === undefined && audienceId !== undefined) out.segment_id = audienceId;
  if (!creating && out.segment_id === undefined) delete out.segment_id;
  if (scheduledAt !== undefined && send !== true) {
    throw new ValidationError([{ loc: ['body', 'scheduled_at'], msg: 'scheduled_at is only allowed with send: true', type: 'value_error' }]);
  }
  return { content: out, send: send === true, scheduledAt: typeof scheduledAt === 'string' ? scheduledAt : undefined };
}

const ref = (b: { id: string }) => ({ object: 'broadcast' as const, id: b.id });
const idOf = (c: Context<AppEnv>) => c.req.param('id')!;

export function registerResendBroadcastRoutes(app: Hono<AppEnv>) {
  app.post('/broadcasts', async (c) => {
    const { config, sql } = c.var.deps;
    const { content, send, scheduledAt } = fromResend(await readJsonBody(c, BODY_LIMIT), true);
    const b = await createBroadcast(sql, c.var.projectId, content, templatesFor(c.var.deps));
    if (send) await sendBroadcast(config, sql, c.var.projectId, b.id, scheduledAt ? { scheduled_at: scheduledAt } : {});
    return c.json({ id: b.id }, 200);
  });

  app.post('/broadcasts/:id/send', async (c) => {
    const { config, sql } = c.var.deps;
    const body = await readJsonBody(c, 64 * 1024).catch(() => ({}));
    const b = await sendBroadcast(config, sql, c.var.projectId, idOf(c), body ?? {});
    return c.json({ id: b.id }, 200);
  });

  app.get('/broadcasts', async (c) => {
    const { limit, after, before, cursor } = resendPageQuery(c);
    const { sql } = c.var.deps;
    if (cursor !== undefined && !(isWellFormedId('broadcast', cursor) && await q.getBroadcast(sql, c.var.projectId, cursor))) {
      throw new ApiError('not_found', 'The cursor does not name a broadcast of this project.');
    }
    const page = await q.listBroadcasts(sql, c.var.projectId, { limit, startingAfter: after, endingBefore: before });
    return c.json({ object: 'list', has_more: page.hasMore, data: page.rows.map(listItem) }, 200);
  });

  app.get('/broadcasts/:id', async (c) => c.json(toResendBroadcast(await requireBroadcast(c.var.deps.sql, c.var.projectId, idOf(c))), 200));

  app.patch('/broadcasts/:id', async (c) => {
    const { content } = fromResend(await readJsonBody(c, BODY_LIMIT), false);
    return c.json({ id: (await updateBroadcast(c.var.deps.sql, c.var.projectId, idOf(c), content, templatesFor(c.var.deps))).id }, 200);
  });

  app.delete('/broadcasts/:id', async (c) => c.json({ ...ref(await deleteBroadcast(c.var.deps.sql, c.var.projectId, idOf(c))), deleted: true }, 200));

  app.post('/broadcasts/:id/cancel', async (c) => c.json(ref(await cancelBroadcast(c.var.deps.sql, c.var.projectId, idOf(c))), 200));

  app.post('/broadcasts/:id/duplicate', async (c) => c.json(ref(await duplicateBroadcast(c.var.deps.sql, c.var.projectId, idOf(c))), 200));

  app.get('/broadcasts/:id/recipients', async (c) => {
    const { sql } = c.var.deps;
    const type = c.req.query('type') ?? 'sent';
    if (!(RECIPIENT_TYPES as readonly string[]).includes(type)) {
      throw new ValidationError([{ loc: ['query', 'type'], msg: `type is one of ${RECIPIENT_TYPES.join(', ')}`, type: 'enum' }]);
    }
    const { limit, after } = resendPageQuery(c);
    const b = await requireBroadcast(sql, c.var.projectId, idOf(c));
    const page = await q.listRecipients(sql, b, type as RecipientType, { limit, startingAfter: after });
    return c.json({ object: 'list', has_more: page.hasMore, data: page.rows.map((r) => ({ id: r.contactId, contact_id: r.contactId, email: r.email })) }, 200);
  });

  app.get('/broadcasts/:id/clicked-links', async (c) => {
    const { sql } = c.var.deps;
    const b = await requireBroadcast(sql, c.var.projectId, idOf(c));
    const rows = await q.clickedLinks(sql, b);
    return c.json({ object: 'list', has_more: false, data: rows.map((r) => ({ id: r.url, url: r.url, clicks: r.clicks, unique_clicks: r.uniqueClicks })) }, 200);
  });
}
