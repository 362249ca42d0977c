import { z } from '@hono/zod-openapi';
import type { ReceivedRow } from './queries.ts';
import { downloadPath } from './links.ts';

export type LinkBase = { secretKey: string; baseUrl: string };

const Verdicts = z.object({ spf: z.string(), dkim: z.string(), dmarc: z.string(), spam: z.string(), virus: z.string() }).openapi('ReceivedVerdicts');

export const ReceivedAttachmentSchema = z.object({
  id: z.string(),
  filename: z.string().nullable(),
  size: z.number().int(),
  content_type: z.string(),
  content_id: z.string().nullable(),
  content_disposition: z.string().nullable(),
}).openapi('ReceivedAttachment');

export const AttachmentLinkSchema = ReceivedAttachmentSchema.extend({
  download_url: z.string().nullable().openapi({ description: 'Works without a key for one hour; null when the virus verdict is `fail`.' }),
  expires_at: z.string().nullable(),
}).openapi('ReceivedAttachmentLink');

const fields = {
  id: z.string().openapi({ example: 'rcv_01JD3Z8K6Q5W0R1S2T3V4X5Y6Z' }),
  from: z.string(),
  to: z.array(z.string()),
  cc: z.array(z.string()),
  reply_to: z.array(z.string()),
  received_for: z.array(z.string()).openapi({ description: 'The recipients SES received the message for at this project\'s domains.' }),
  subject: z.string(),
  message_id: z.string().nullable(),
  in_reply_to: z.string().nullable(),
  references: z.array(z.string()),
  html: z.string().nullable(),
  text: z.string().nullable(),
  stripped_text: z.string().nullable().openapi({ description: 'The reply without its quoted history and signature.' }),
  attachments: z.array(ReceivedAttachmentSchema),
  verdicts: Verdicts,
  is_auto_reply: z.boolean(),
  is_bounce: z.boolean(),
  in_reply_to_email_id: z.string().nullable().openapi({ description: 'The email this message answers, when Mailroom knows it.' }),
  thread_id: z.string().openapi({ description: 'The id of the first email of the chain, sent or received.' }),
  content_too_large: z.boolean(),
  parse_failed: z.boolean().openapi({ description: 'The message was over a parse budget or could not be parsed: it is stored from the notification\'s headers, with no bodies or attachments.' }),
  created_at: z.string(),
};

export const ReceivedEmailSchema = z.object({
  ...fields,
  headers: z.record(z.string(), z.string()),
  raw: z.object({ download_url: z.string().nullable(), expires_at: z.string().nullable() }).nullable(),
}).openapi('ReceivedEmail');

export const ReceivedEmailList = z.object({ data: z.array(ReceivedEmailSchema), has_more: z.boolean() }).openapi('ReceivedEmailList');

/** A virus found in the message: the email is kept, its attachments and raw source are not served (§20.6). */
export const withheld = (row: Pick<ReceivedRow, 'verdicts'>) => row.verdicts.virus === 'fail';

/** Whether the raw message can be had: kept inline, or in the customer's bucket; never after a body purge. */
export const rawAvailable = (row: ReceivedRow) => !row.bodyPurged && (row.hasRaw || Boolean(row.s3Bucket && row.s3Key));

export function link(base: LinkBase, row: ReceivedRow, part: string) {
  const { path, expiresAt } = downloadPath(base.secretKey, { projectId: row.projectId, receivedId: row.id, part });
  return { download_url: `${base.baseUrl}${path}`, expires_at: expiresAt.toISOString() };
}

function rawOf(base: LinkBase, row: ReceivedRow) {
  if (!rawAvailable(row)) return null;
  if (withheld(row)) return { download_url: null, expires_at: null };
  return link(base, row, 'raw');
}

const attachmentOf = (a: ReceivedRow['attachments'][number]) => ({
  id: a.id, filename: a.filename, size: a.size, content_type: a.content_type, content_id: a.content_id, content_disposition: a.content_disposition,
});

/** The read's fields but `raw` and `headers`: what `email.received` carries too. */
export function toReceivedData(row: ReceivedRow) {
  return {
    id: row.id,
    from: row.fromAddress,
    to: row.toAddresses,
    cc: row.ccAddresses,
    reply_to: row.replyToAddresses,
    received_for: row.receivedFor,
    subject: row.subject,
    message_id: row.messageIdHeader,
    in_reply_to: row.inReplyTo,
    references: row.references,
    html: row.html,
    text: row.text,
    stripped_text: row.strippedText,
    attachments: row.attachments.map(attachmentOf),
    verdicts: row.verdicts,
    is_auto_reply: row.isAutoReply,
    is_bounce: row.isBounce,
    in_reply_to_email_id: row.inReplyToEmailId,
    thread_id: row.threadId,
    content_too_large: row.contentTooLarge,
    parse_failed: row.parseFailed,
    created_at: row.createdAt.toISOString(),
  };
}

export function toReceived(base: LinkBase, row: ReceivedRow) {
  const { created_at: createdAt, ...rest } = toReceivedData(row);
  return { ...rest, headers: row.headers, raw: rawOf(base, row), created_at: createdAt };
}

export function toAttachmentLink(base: LinkBase, row: ReceivedRow, a: ReceivedRow['attachments'][number]) {
  const url = withheld(row) || !rawAvailable(row) ? { download_url: null, expires_at: null } : link(base, row, a.id);
  return { ...attachmentOf(a), ...url };
}

/** The most `email.received` carries inline (§20.4). */
export const EVENT_BODY_LIMIT = 256 * 1024;

/**
 * The event's data: the read without raw and headers, and without html when the body would
 * pass 256 KB (then `content_truncated`). A text alone past the limit goes the same way, so
 * the payload stays within it.
 */
export function receivedEventData(row: ReceivedRow) {
  const data: Record<string, unknown> = { ...toReceivedData(row), content_truncated: false };
  const size = () => Buffer.byteLength(JSON.stringify(data));
  if (size() <= EVENT_BODY_LIMIT) return data;
  data.html = null;
  data.content_truncated = true;
  if (size() > EVENT_BODY_LIMIT) { data.text = null; data.stripped_text = null; }
  return data;
}
