import { z } from '@hono/zod-openapi';
import { ValidationError, validationErrorFromZod } from '../http/errors.ts';
import { isMailbox } from './mailbox.ts';
import type { EmailContent } from './compose.ts';
import { idClockNow } from '../platform/ids.ts';

export const MAX_RECIPIENTS = 50;
const RESERVED_HEADERS = new Set(['from', 'to', 'cc', 'bcc', 'subject', 'date', 'message-id', 'mime-version', 'content-type', 'content-transfer-encoding']);
const HEADER_NAME = /^[!-9;-~]+$/;
const MIME_TYPE = /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}(?:\s*;[ -~]*)?$/;

const issue = (type: string, message: string, ctx?: Record<string, unknown>) => ({ message, params: { type, ...(ctx ? { ctx } : {}) } });

// PostgreSQL refuses NUL in text and unpaired surrogates in jsonb; refusing them here keeps a
// stray byte from ever reaching the database as a 500.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
export const text = () => z.string().refine((s) => !s.includes('\0') && !LONE_SURROGATE.test(s), issue('string_invalid', 'String must not contain NUL or unpaired surrogate characters'));

export const mailbox = (max: number) =>
  text()
    .max(max)
    .refine(isMailbox, issue('value_error', 'Not a valid email address: expected one RFC 5322 mailbox such as "Name <user@example.com>"'))
    .transform((s) => s.trim());

const recipients = (what: string, min = 0) =>
  z.union([mailbox(998), z.array(mailbox(998)).min(min).max(MAX_RECIPIENTS)], { error: 'Input should be an email address or a list of email addresses' })
    .openapi({ description: `${what}: one address or a list; each may carry a display name.`, example: ['Alice <alice@example.com>'] });

const isBase64 = (s: string) => s.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(s);

export const AttachmentRequest = z
  .object({
    filename: text().min(1).max(255).refine((s) => !/[\x00-\x1f\x7f]/.test(s), issue('value_error', 'Filename must not contain control characters')),
    content: z
      .string()
      .transform((s) => s.replace(/[\r\n\t ]+/g, ''))
      .refine(isBase64, issue('base64_invalid', 'Content must be valid base64'))
      .openapi({ description: 'Base64-encoded file content.', example: 'SGVsbG8=' }),
    content_type: z
      .string()
      .max(255)
      .regex(MIME_TYPE, 'Content type must be a MIME type such as application/pdf')
      // A multipart type would turn the attachment into a container and drop its bytes.
      .refine((t) => !/^multipart\//i.test(t), issue('value_error', 'An attachment cannot be multipart/*'))
      .default('application/octet-stream')
      .openapi({ description: 'MIME type. Default `application/octet-stream`.' }),
    content_id: z
      .string()
      .min(1)
      .max(255)
      .regex(/^[!-;=?-~]+$/, 'Content ID must be printable ASCII without spaces or angle brackets')
      .optional()
      .openapi({ description: 'Sends the attachment inline with this `Content-ID`, for `<img src="cid:…">` in the HTML.', example: 'logo' }),
  })
  .openapi('AttachmentRequest');

/** Caps that keep one email's validation and assembly bounded whatever the body size allows. */
export const MAX_HEADERS = 50;
export const MAX_ATTACHMENTS = 50;

const Headers = z
  .record(z.string(), text().refine((v) => !/[\r\n]/.test(v), issue('header_value_invalid', 'Header values must not contain CR or LF')))
  .superRefine((headers, ctx) => {
    const names = Object.keys(headers);
    if (names.length > MAX_HEADERS) {
      ctx.addIssue({ code: 'custom', path: [], ...issue('too_long', `At most ${MAX_HEADERS} custom headers per email`, { max_length: MAX_HEADERS, actual_length: names.length }) });
      return;
    }
    for (const name of names) {
      if (!HEADER_NAME.test(name)) ctx.addIssue({ code: 'custom', path: [name], ...issue('header_name_invalid', 'Header names must be printable ASCII without colon or space (^[!-9;-~]+$)') });
      else if (name.length > 76) ctx.addIssue({ code: 'custom', path: [name], ...issue('header_name_too_long', 'Header names must be at most 76 characters', { max_length: 76 }) });
      else if (RESERVED_HEADERS.has(name.toLowerCase())) ctx.addIssue({ code: 'custom', path: [name], ...issue('header_reserved', `The ${name} header is set by the service and cannot be overridden`) });
    }
  })
  .openapi({ description: 'Custom headers, at most 50. Names match `^[!-9;-~]+$`, at most 76 characters.', example: { 'X-Entity-Ref-ID': 'invoice-42' } });

const present = (s: string | null | undefined) => typeof s === 'string' && s.length > 0;

const TAG_PART = /^[A-Za-z0-9_-]{1,256}$/;
export const MAX_TAGS = 10;

export const Tag = z
  .object({
    name: z.string().regex(TAG_PART, 'Tag names are 1 to 256 ASCII letters, digits, _ or -'),
    value: z.string().regex(TAG_PART, 'Tag values are 1 to 256 ASCII letters, digits, _ or -'),
  })
  .openapi('Tag');

export const Tags = z
  .array(Tag)
  .max(MAX_TAGS)
  .superRefine((tags, ctx) => {
    const seen = new Set<string>();
    tags.forEach((t, i) => {
      if (seen.has(t.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], ...issue('tag_name_duplicate', `Tag name ${t.name} is given twice`) });
      seen.add(t.name);
    });
  })
  .openapi({ description: 'Up to 10 name/value pairs, carried in every event of the email and sent to SES as message tags.' });

/** How far ahead a send may be scheduled. */
export const MAX_SCHEDULE_DAYS = 30;
const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|z|[+-]\d{2}:\d{2})$/;

/** An ISO 8601 date-time with an offset, at most 30 days ahead; a past time means now. */
export const ScheduledAt = z
  .string()
  .max(64)
  .refine((s) => ISO_WITH_OFFSET.test(s) && !Number.isNaN(Date.parse(s)), issue('datetime_invalid', 'scheduled_at must be an ISO 8601 date-time with an offset, such as 2026-05-04T09:00:00Z'))
  .refine((s) => Date.parse(s) <= idClockNow() + MAX_SCHEDULE_DAYS * 86_400_000, issue('datetime_too_late', `scheduled_at may be at most ${MAX_SCHEDULE_DAYS} days ahead`, { max_days: MAX_SCHEDULE_DAYS }))
  .openapi({ description: 'Send later: an ISO 8601 date-time with an offset, at most 30 days ahead. A time in the past sends at once.', example: '2026-05-04T09:00:00Z' });

/** A sender as the API's `from` takes it; the SMTP relay checks a message's From header with it. */
export const FromAddress = mailbox(320);

/** At most this many variables in one send; a template declares at most as many. */
export const MAX_TEMPLATE_VARIABLES = 100;

export const TemplateRef = z
  .object({
    id: z.string().min(1).max(100).openapi({ description: 'The template\'s id (`tmpl_…`) or its alias.', example: 'welcome' }),
    variables: z.record(z.string().max(64), z.unknown())
      .refine((v) => Object.keys(v).length <= MAX_TEMPLATE_VARIABLES, issue('too_long', `At most ${MAX_TEMPLATE_VARIABLES} variables`, { max_length: MAX_TEMPLATE_VARIABLES }))
      .optional()
      .openapi({ description: 'A value for each declared variable: a string or a number, as declared. A missing one takes its `fallback_value`.', example: { name: 'Ann' } }),
  })
  .strict()
  .openapi('SendTemplateRef', { description: 'Send with a published template (§14) instead of `subject`, `html` and `text`. `from`, `subject` and `reply_to` given here override the template\'s.' });

export type TemplateRef = { id: string; variables: Record<string, unknown> };

export const SendEmailRequest = z
  .object({
    from: FromAddress.optional().openapi({ description: 'Sender, max 320 characters; may carry a display name. Required unless the template gives one.', example: 'Acme <billing@acme.example>' }),
    to: recipients('Recipients (at least one)', 1),
    subject: text().max(998).optional().openapi({ description: 'Required unless the template gives one.', example: 'Your invoice' }),
    html: text().nullable().optional(),
    text: text().nullable().optional(),
    cc: recipients('Visible copies').nullable().optional(),
    bcc: recipients('Hidden copies; recorded, never returned').nullable().optional(),
    reply_to: recipients('Reply-To addresses').nullable().optional(),
    headers: Headers.optional(),
    attachments: z.array(AttachmentRequest).max(MAX_ATTACHMENTS).openapi({ description: `At most ${MAX_ATTACHMENTS}.` }).optional(),
    scheduled_at: ScheduledAt.optional(),
    tags: Tags.optional(),
    track_opens: z.boolean().optional().openapi({ description: 'Open tracking for this email, overriding the sender domain\'s `open_tracking` (off by default). Needs the domain\'s `tracking_domain` or PUBLIC_BASE_URL, else 422.' }),
    track_clicks: z.boolean().optional().openapi({ description: 'Click tracking for this email, overriding the sender domain\'s `click_tracking` (off by default). Needs the domain\'s `tracking_domain` or PUBLIC_BASE_URL, else 422.' }),
    template: TemplateRef.optional(),
    topic_id: z.string().max(100).nullable().optional().openapi({ description: 'A topic of the project (`topic_…`): a recipient who is a contact opted out of it is skipped, and an email to one contact carries the topic\'s one-click unsubscribe.' }),
  })
  .superRefine((body, ctx) => {
    const count = (v: string | string[] | null | undefined) => (v == null ? 0 : typeof v === 'string' ? 1 : v.length);
    const total = count(body.to) + count(body.cc) + count(body.bcc);
    if (total > MAX_RECIPIENTS) {
      ctx.addIssue({ code: 'custom', path: [], ...issue('too_many_recipients', `At most ${MAX_RECIPIENTS} recipients in to, cc and bcc together`, { max_recipients: MAX_RECIPIENTS, count: total }) });
    }
    if (body.template) {
      // The template is the content; a request's own html or text would be silently dropped.
      for (const part of ['html', 'text'] as const) {
        if (body[part] != null) ctx.addIssue({ code: 'custom', path: [part], ...issue('template_conflict', `Give ${part} through the template, or send without a template`) });
      }
      return;
    }
    for (const field of ['from', 'subject'] as const) {
      if (body[field] === undefined) ctx.addIssue({ code: 'custom', path: [field], ...issue('missing', 'Field required') });
    }
    if (!present(body.html) && !present(body.text)) ctx.addIssue({ code: 'custom', path: [], ...issue('missing_content', 'Provide html, text or both') });
  })
  .openapi('SendEmailRequest');

export const SendEmailResponse = z
  .object({
    id: z.string().openapi({ example: 'email_01JD3Z8K6Q5W0R1S2T3V4X5Y6Z' }),
    status: z.enum(['queued', 'scheduled']).openapi({ description: '`scheduled` when `scheduled_at` is in the future.' }),
  })
  .openapi('SendEmailResponse');

export const IdempotencyHeaders = z.object({
  'idempotency-key': z.string().min(1).max(256).optional().openapi({
    description: 'Repeat-safe sends: the same key and body within 24 h answer the first message\'s id; another body answers 409.',
  }),
});

/** The request after validation, in the shape the database and the composer take. */
export type EmailTag = { name: string; value: string };

/** A list filter on one tag, written `name:value`. */
export const TAG_FILTER = /^[A-Za-z0-9_-]{1,256}:[A-Za-z0-9_-]{1,256}$/;

export function parseTagFilter(value: string): EmailTag | undefined {
  if (!TAG_FILTER.test(value)) return undefined;
  const [name, tagValue] = value.split(':') as [string, string];
  return { name, value: tagValue };
}
export type SendEmail = EmailContent & { scheduledAt: Date | null; tags: EmailTag[]; trackOpens: boolean | null; trackClicks: boolean | null; topicId?: string | null };

/**
 * A request as validated, before its template (if any) is rendered: with a template, `from` and
 * `subject` are the request's overrides (empty when not given) and there is no content yet.
 */
export type ParsedSend = SendEmail & { template: (TemplateRef & { overrides: { from?: string; subject?: string; replyTo?: string[] } }) | null };

const list = (v: string | string[] | null | undefined) => (v == null ? [] : typeof v === 'string' ? [v] : v);
const orNull = (s: string | null | undefined) => (present(s) ? s! : null);

type Issue = z.core.$ZodIssue;
const receivedUndefined = (i: Issue) => i.code === 'invalid_type' && /received undefined/.test(i.message);
const receivedArray = (i: Issue) => i.code === 'invalid_type' && /received array/.test(i.message);

/**
 * A recipient field is `string | string[]`. When both branches fail, zod reports one vague
 * union issue; report the branch the caller was aiming at instead (a missing field as missing, an
 * over-long list as too long), so the 422 says what is actually wrong.
 */
function explainUnions(issues: Issue[]): Issue[] {
  return issues.flatMap((issue): Issue[] => {
    if (issue.code !== 'invalid_union' || issue.errors.length !== 2) return [issue];
    const [asString = [], asList = []] = issue.errors;
    const prefix = (list: Issue[]) => list.map((i) => ({ ...i, path: [...issue.path, ...i.path] }));
    if (asString.some(receivedUndefined)) return prefix(asString.filter(receivedUndefined)).map((i) => ({ ...i, message: 'Invalid input: expected string, received undefined' }));
    if (asString.some(receivedArray)) return prefix(asList);
    return [issue];
  });
}

/** Whether a plain object has more than `max` own keys; stops counting at `max + 1`. */
export function hasMoreKeysThan(value: unknown, max: number): boolean {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  let n = 0;
  for (const k in value) if (Object.hasOwn(value, k) && ++n > max) return true;
  return false;
}

/**
 * The maps of a send are counted before any entry is validated: validating first would spend the
 * work the cap exists to refuse.
 */
function refuseOversizedMaps(body: unknown) {
  if (body === null || typeof body !== 'object') return;
  const b = body as { headers?: unknown; template?: { variables?: unknown } };
  const problems = [];
  if (hasMoreKeysThan(b.headers, MAX_HEADERS)) {
    problems.push({ loc: ['body', 'headers'], msg: `At most ${MAX_HEADERS} custom headers per email`, type: 'too_long', ctx: { max_length: MAX_HEADERS } });
  }
  if (b.template && typeof b.template === 'object' && hasMoreKeysThan(b.template.variables, MAX_TEMPLATE_VARIABLES)) {
    problems.push({ loc: ['body', 'template', 'variables'], msg: `At most ${MAX_TEMPLATE_VARIABLES} variables`, type: 'too_long', ctx: { max_length: MAX_TEMPLATE_VARIABLES } });
  }
  if (problems.length) throw new ValidationError(problems);
}

/** Validates a parsed JSON body; throws the spec's 422 with every problem found. */
export function parseSendRequest(body: unknown): ParsedSend {
  refuseOversizedMaps(body);
  const parsed = SendEmailRequest.safeParse(body);
  if (!parsed.success) throw validationErrorFromZod(new z.ZodError(explainUnions(parsed.error.issues)), 'json');
  const b = parsed.data;
  return {
    from: b.from ?? '',
    to: list(b.to),
    cc: list(b.cc),
    bcc: list(b.bcc),
    replyTo: list(b.reply_to),
    subject: b.subject ?? '',
    html: orNull(b.html),
    text: orNull(b.text),
    headers: b.headers ?? {},
    attachments: (b.attachments ?? []).map((a) => ({ filename: a.filename, contentType: a.content_type, content: a.content, contentId: a.content_id })),
    scheduledAt: b.scheduled_at ? new Date(b.scheduled_at) : null,
    tags: b.tags ?? [],
    trackOpens: b.track_opens ?? null,
    trackClicks: b.track_clicks ?? null,
    topicId: b.topic_id ?? null,
    template: b.template
      ? { id: b.template.id, variables: b.template.variables ?? {}, overrides: { from: b.from, subject: b.subject, replyTo: b.reply_to != null ? list(b.reply_to) : undefined } }
      : null,
  };
}

export function parseIdempotencyKey(value: string | undefined): string | undefined {
  const parsed = IdempotencyHeaders.safeParse({ 'idempotency-key': value });
  if (!parsed.success) throw validationErrorFromZod(parsed.error, 'header');
  return parsed.data['idempotency-key'];
}
