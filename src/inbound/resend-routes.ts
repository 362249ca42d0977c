import type { Hono } from 'hono';
import type { AppEnv } from '../http/context.ts';
import { ApiError } from '../http/errors.ts';
import { isWellFormedId } from '../platform/ids.ts';
import { resendPageQuery } from '../resend/paging.ts';
import { listReceived, receivedExists, type ReceivedRow } from './queries.ts';
import { linkBase, requireReceived } from './routes.ts';
import { toAttachmentLink, toReceived, type LinkBase } from './schemas.ts';

/** Resend's received email: its fields (`object`, `bcc`) around Mailroom's read. */
function toResendReceived(base: LinkBase, row: ReceivedRow) {
  return { object: 'email' as const, ...toReceived(base, row), bcc: null };
}

function toResendListItem(base: LinkBase, row: ReceivedRow) {
  const { html: _html, text: _text, headers: _headers, raw: _raw, object: _object, ...rest } = toResendReceived(base, row);
  return rest;
}

/** Resend's attachment: `content_disposition` `inline` or `attachment`, and a `download_url` string. */
function toResendAttachment(base: LinkBase, row: ReceivedRow, a: ReceivedRow['attachments'][number]) {
  const link = toAttachmentLink(base, row, a);
  return {
    ...link,
    filename: link.filename ?? undefined,
    content_id: link.content_id ?? undefined,
    content_disposition: link.content_disposition === 'inline' ? 'inline' : 'attachment',
  };
}

/**
 * `/resend/emails/receiving…` in Resend's shapes, so `resend.emails.receiving.get/list` and
 * `.attachments.get/list` work unchanged. Wired ahead of `/resend/emails/:id`.
 */
export function registerResendReceivingRoutes(app: Hono<AppEnv>) {
  app.get('/emails/receiving', async (c) => {
    const { limit, after, before, cursor } = resendPageQuery(c);
    const { sql } = c.var.deps;
    if (cursor !== undefined && !(isWellFormedId('received', cursor) && await receivedExists(sql, c.var.projectId, cursor))) {
      throw new ApiError('not_found', 'The cursor does not name a received email of this project.');
    }
    const page = await listReceived(sql, c.var.projectId, { limit, startingAfter: after, before });
    const base = linkBase(c);
    return c.json({ object: 'list', has_more: page.hasMore, data: page.rows.map((r) => toResendListItem(base, r)) }, 200);
  });

  app.get('/emails/receiving/:id', async (c) => {
    const row = await requireReceived(c, c.req.param('id'));
    return c.json(toResendReceived(linkBase(c), row), 200);
  });

  app.get('/emails/receiving/:id/attachments', async (c) => {
    const { limit, after, before } = resendPageQuery(c);
    const row = await requireReceived(c, c.req.param('id'));
    const base = linkBase(c);
    let items = row.attachments;
    if (after !== undefined) items = items.slice(items.findIndex((a) => a.id === after) + 1 || items.length);
    if (before !== undefined) items = items.slice(0, Math.max(0, items.findIndex((a) => a.id === before)));
    return c.json({ object: 'list', has_more: items.length > limit, data: items.slice(0, limit).map((a) => toResendAttachment(base, row, a)) }, 200);
  });

  app.get('/emails/receiving/:id/attachments/:attachment_id', async (c) => {
    const row = await requireReceived(c, c.req.param('id'));
    const attachment = row.attachments.find((a) => a.id === c.req.param('attachment_id'));
    if (!attachment) throw new ApiError('not_found', 'Attachment not found.');
    return c.json({ object: 'attachment', ...toResendAttachment(linkBase(c), row, attachment) }, 200);
  });
}
