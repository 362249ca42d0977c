import { z } from '@hono/zod-openapi';
import { FromAddress, mailbox, TemplateRef, text } from '../emails/validate.ts';
import type { BroadcastCounts, BroadcastRow } from './queries.ts';

const MAX_CONTENT = 2 * 1024 * 1024;

const fields = {
  name: text().max(256).optional(),
  segment_id: z.string().max(100),
  topic_id: z.string().max(100).nullable().optional(),
  from: FromAddress,
  reply_to: z.union([mailbox(320), z.array(mailbox(320)).max(50)]).optional(),
  subject: text().min(1).max(998),
  preview_text: text().max(500).nullable().optional(),
  html: text().max(MAX_CONTENT).nullable().optional(),
  text: text().max(MAX_CONTENT).nullable().optional(),
  template: TemplateRef.optional().openapi({
    description: 'A published template (§14) as the content instead of `html` and `text`, rendered with `variables` when the broadcast is ' +
      'created or updated; the per-contact placeholders then apply to its output as to inline content. `from`, `subject` and `reply_to` ' +
      'given here override the template\'s.',
  }),
};

type Fields = { [K in keyof typeof fields]?: unknown };
const problem = (type: string, message: string) => ({ message, params: { type } });

/** A template is the content: html or text beside it would be silently dropped. Without one, `from` and `subject` are required. */
function checkContent(body: Fields, ctx: z.RefinementCtx, creating: boolean) {
  if (body.template) {
    for (const part of ['html', 'text'] as const) {
      if (body[part] != null) ctx.addIssue({ code: 'custom', path: [part], ...problem('template_conflict', `Give ${part} through the template, or create the broadcast without a template`) });
    }
  } else if (creating) {
    for (const field of ['from', 'subject'] as const) {
      if (body[field] === undefined) ctx.addIssue({ code: 'custom', path: [field], ...problem('missing', 'Field required') });
    }
  }
}

export const CreateBroadcastRequest = z
  .object({ ...fields, from: fields.from.optional(), subject: fields.subject.optional() })
  .strict()
  .superRefine((body, ctx) => checkContent(body, ctx, true))
  .openapi('CreateBroadcastRequest');
export const UpdateBroadcastRequest = z
  .object(fields)
  .partial()
  .strict()
  .superRefine((body, ctx) => checkContent(body, ctx, false))
  .openapi('UpdateBroadcastRequest');
export const SendBroadcastRequest = z
  .object({ scheduled_at: z.string().max(200).nullable().optional().openapi({ description: 'ISO 8601, or natural language such as "in 1 hour" or "tomorrow at 9am" (UTC); at most 30 days ahead.' }) })
  .strict()
  .openapi('SendBroadcastRequest');

const Counts = z.object({
  recipients: z.number().int(), suppressed: z.number().int(), queued: z.number().int(), sent: z.number().int(),
  delivered: z.number().int(), opened: z.number().int(), clicked: z.number().int(), bounced: z.number().int(),
  complained: z.number().int(), unsubscribed: z.number().int(), failed: z.number().int(),
});

export const BroadcastResponse = z
  .object({
    id: z.string(),
    name: z.string(),
    segment_id: z.string(),
    topic_id: z.string().nullable(),
    from: z.string(),
    reply_to: z.array(z.string()),
    subject: z.string(),
    preview_text: z.string().nullable(),
    html: z.string().nullable(),
    text: z.string().nullable(),
    template: z.object({ id: z.string(), version: z.number().int() }).nullable()
      .openapi({ description: 'The published template version `html`, `text` and `subject` were rendered from, if any.' }),
    status: z.enum(['draft', 'scheduled', 'sending', 'sent', 'canceled']),
    scheduled_at: z.string().nullable(),
    sent_at: z.string().nullable(),
    created_at: z.string(),
    counts: Counts.optional(),
  })
  .openapi('Broadcast');

export const BroadcastList = z.object({ data: z.array(BroadcastResponse), has_more: z.boolean() }).openapi('BroadcastList');

export const RecipientList = z
  .object({ data: z.array(z.object({ contact_id: z.string(), email: z.string(), email_id: z.string().nullable() })), has_more: z.boolean() })
  .openapi('BroadcastRecipientList');

export const ClickedLinkList = z
  .object({ data: z.array(z.object({ url: z.string(), clicks: z.number().int(), unique_clicks: z.number().int() })) })
  .openapi('BroadcastClickedLinks');

export function toBroadcastResponse(b: BroadcastRow, counts?: BroadcastCounts, withBodies = true): z.infer<typeof BroadcastResponse> {
  return {
    id: b.id,
    name: b.name,
    segment_id: b.segmentId,
    topic_id: b.topicId,
    from: b.fromAddress,
    reply_to: b.replyToAddresses,
    subject: b.subject,
    preview_text: b.previewText,
    html: withBodies ? b.html : null,
    text: withBodies ? b.text : null,
    template: b.templateId !== null && b.templateVersion !== null ? { id: b.templateId, version: b.templateVersion } : null,
    status: b.status,
    scheduled_at: b.scheduledAt?.toISOString() ?? null,
    sent_at: b.sentAt?.toISOString() ?? null,
    created_at: b.createdAt.toISOString(),
    ...(counts ? { counts } : {}),
  };
}
