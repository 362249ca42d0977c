import { z } from '@hono/zod-openapi';

export const SinkMessageSummary = z
  .object({
    id: z.string().openapi({ example: 'msg_01JD3Z8K6Q5W0R1S2T3V4X5Y6Z' }),
    email_id: z.string().nullable().openapi({
      description: 'The email this message was sent for, when the worker delivered it; null for mail sent straight to the sink.',
    }),
    from: z.string(),
    to: z.array(z.string()).openapi({ description: 'The To header; the envelope recipients when the message has neither To nor Cc.' }),
    cc: z.array(z.string()),
    subject: z.string(),
    received_at: z.string().datetime(),
    size_bytes: z.number().int().openapi({ description: 'Size of the raw message as received.' }),
  })
  .openapi('SinkMessageSummary');

export const SinkMessageAttachment = z
  .object({
    filename: z.string().nullable(),
    content_type: z.string(),
    size_bytes: z.number().int(),
  })
  .openapi('SinkMessageAttachment');

export const SinkMessageResponse = SinkMessageSummary.extend({
  text: z.string().nullable().openapi({ description: 'The plain text part; null when the message had none.' }),
  html: z.string().nullable().openapi({ description: 'The HTML part as sent; null when the message had none.' }),
  headers: z.record(z.string(), z.string()).openapi({
    description: 'Every header as received (unfolded, not decoded). Repeated headers are joined with a newline.',
  }),
  attachments: z.array(SinkMessageAttachment),
  raw: z.string().openapi({ description: 'The full message source as received, decoded as UTF-8.' }),
}).openapi('SinkMessageResponse');

export const SinkMessageList = z
  .object({ data: z.array(SinkMessageSummary), has_more: z.boolean() })
  .openapi('SinkMessageList');

export type SinkMessageSummaryRow = {
  id: string;
  emailId: string | null;
  fromAddress: string;
  toAddresses: string[];
  ccAddresses: string[];
  subject: string;
  receivedAt: Date;
  sizeBytes: number;
};

export type SinkMessageRow = SinkMessageSummaryRow & {
  text: string | null;
  html: string | null;
  headers: Record<string, string>;
  attachments: { filename: string | null; content_type: string; size_bytes: number }[];
  raw: Buffer;
};

export function toSinkSummary(row: SinkMessageSummaryRow): z.infer<typeof SinkMessageSummary> {
  return {
    id: row.id,
    email_id: row.emailId,
    from: row.fromAddress,
    to: row.toAddresses,
    cc: row.ccAddresses,
    subject: row.subject,
    received_at: row.receivedAt.toISOString(),
    size_bytes: row.sizeBytes,
  };
}

export function toSinkMessage(row: SinkMessageRow): z.infer<typeof SinkMessageResponse> {
  return {
    ...toSinkSummary(row),
    text: row.text,
    html: row.html,
    headers: row.headers,
    attachments: row.attachments,
    raw: row.raw.toString('utf8'),
  };
}
