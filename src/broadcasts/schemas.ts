import { z } from '@hono/zod-openapi';
import { FromAddress, mailbox, text } from '../emails/validate.ts';
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
};

export const CreateBroadcastRequest = z.object(fields).strict().openapi('CreateBroadcastRequest');
export const UpdateBroadcastRequest = z.object(fields).partial().strict().openapi('UpdateBroadcastRequest');
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
    status: b.status,
    scheduled_at: b.scheduledAt?.toISOString() ?? null,
    sent_at: b.sentAt?.toISOString() ?? null,
    created_at: b.createdAt.toISOString(),
    ...(counts ? { counts } : {}),
  };
}
