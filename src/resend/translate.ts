import { ValidationError } from '../http/errors.ts';
import type { EmailEnvelopeRow } from '../emails/queries.ts';

/**
 * Resend's request and response shapes, mapped onto Mailroom's. Everything Resend-specific
 * lives in this folder; the sending itself is the same service functions `/v1` uses.
 */

/** Fields of a Resend send that Mailroom takes; anything else present is refused by name. */
const SUPPORTED = new Set(['from', 'to', 'cc', 'bcc', 'reply_to', 'subject', 'html', 'text', 'headers', 'attachments', 'tags', 'scheduled_at', 'template', 'topic_id']);
const ATTACHMENT_FIELDS = new Set(['content', 'filename', 'content_type', 'content_id']);
/** Fields Resend has that Mailroom deliberately does not, with what to do instead. */
const REFUSED: Record<string, string> = {};

function refuse(field: string, message: string): never {
  throw new ValidationError([{ loc: ['body', field], msg: message, type: 'unsupported_field' }]);
}

function present(value: unknown) {
  return value !== undefined && value !== null;
}

/** `{"type":"Buffer","data":[…]}` (a JSON-serialised Node Buffer) becomes base64. */
function attachmentContent(content: unknown, index: number): unknown {
  if (content && typeof content === 'object' && (content as { type?: unknown }).type === 'Buffer' && Array.isArray((content as { data?: unknown }).data)) {
    const data = (content as { data: unknown[] }).data;
    if (!data.every((b) => Number.isInteger(b) && (b as number) >= 0 && (b as number) <= 255)) {
      refuse(`attachments[${index}].content`, 'a serialised Buffer holds bytes 0 to 255');
    }
    return Buffer.from(data as number[]).toString('base64');
  }
  return content;
}

/** A Resend send body as Mailroom's send body, or a 422 naming the first unsupported field. */
export function fromResendEmail(body: unknown, prefix = ''): unknown {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return body; // the shared validation explains it
  const input = body as Record<string, unknown>;
  for (const [field, value] of Object.entries(input)) {
    if (!present(value)) continue;
    if (REFUSED[field]) refuse(`${prefix}${field}`, REFUSED[field]);
    if (!SUPPORTED.has(field)) refuse(`${prefix}${field}`, `${field} is not supported by Mailroom`);
  }
  const attachments = Array.isArray(input.attachments)
    ? input.attachments.map((a: unknown, i) => {
      if (!a || typeof a !== 'object') return a;
      const att = a as Record<string, unknown>;
      for (const [field, value] of Object.entries(att)) {
        if (!present(value)) continue;
        if (field === 'path') refuse(`${prefix}attachments[${i}].path`, 'remote attachments (path) are not supported; send the content');
        if (!ATTACHMENT_FIELDS.has(field)) refuse(`${prefix}attachments[${i}].${field}`, `${field} is not supported by Mailroom`);
      }
      return {
        filename: att.filename,
        content: attachmentContent(att.content, i),
        ...(present(att.content_type) ? { content_type: att.content_type } : {}),
        ...(present(att.content_id) ? { content_id: att.content_id } : {}),
      };
    })
    : input.attachments;
  const out: Record<string, unknown> = {};
  for (const field of SUPPORTED) if (present(input[field])) out[field] = input[field];
  if (attachments !== undefined) out.attachments = attachments;
  return out;
}

export type StoredEmail = EmailEnvelopeRow & {
  id: string;
  status: string;
  createdAt: Date;
  scheduledAt: Date | null;
  tags: { name: string; value: string }[];
  lastEventType: string | null;
};

/** The latest of queued, scheduled, canceled, sent, delivered, delivery_delayed, bounced, complained, failed, opened or clicked. */
function lastEvent(e: StoredEmail): string {
  if (e.lastEventType) return e.lastEventType.replace(/^email\./, '');
  if (e.status === 'sending') return 'queued';
  return e.status;
}

/** Resend's email object. Unlike `/v1`, it shows `bcc`, as Resend does. */
export function toResendEmail(e: StoredEmail) {
  return {
    object: 'email' as const,
    id: e.id,
    from: e.fromAddress,
    to: e.toAddresses,
    cc: e.ccAddresses,
    bcc: e.bccAddresses,
    reply_to: e.replyToAddresses,
    subject: e.subject,
    html: e.html,
    text: e.text,
    created_at: e.createdAt.toISOString(),
    scheduled_at: e.scheduledAt?.toISOString() ?? null,
    last_event: lastEvent(e),
    tags: e.tags,
  };
}
