import { z } from '@hono/zod-openapi';

export const EMAIL_STATUSES = ['scheduled', 'queued', 'sending', 'sent', 'failed', 'canceled'] as const;
export type EmailStatus = (typeof EMAIL_STATUSES)[number];

export const EmailResponse = z
  .object({
    id: z.string().openapi({ example: 'email_01JD3Z8K6Q5W0R1S2T3V4X5Y6Z' }),
    status: z.enum(EMAIL_STATUSES),
    from: z.string(),
    to: z.array(z.string()),
    cc: z.array(z.string()),
    reply_to: z.array(z.string()),
    subject: z.string(),
    created_at: z.string().datetime(),
    html: z.string().nullable().optional(),
    text: z.string().nullable().optional(),
    headers: z.record(z.string(), z.string()).optional(),
    provider_message_id: z.string().nullable().optional(),
    sent_at: z.string().datetime().nullable().optional(),
    delivered_at: z.string().datetime().nullable().optional(),
    last_error: z.string().nullable().optional(),
    scheduled_at: z.string().datetime().nullable().optional().openapi({ description: 'When a scheduled email is due; null otherwise.' }),
    tags: z.array(z.object({ name: z.string(), value: z.string() })).optional(),
    opened_at: z.string().datetime().nullable().optional().openapi({ description: 'The first open recorded (open tracking, or SES\'s own Open events); null until then.' }),
    clicked_at: z.string().datetime().nullable().optional().openapi({ description: 'The first tracked click; null until then.' }),
    template: z.object({ id: z.string(), version: z.number().int() }).nullable().optional()
      .openapi({ description: 'The template and published version the email was rendered from; null when it was not.' }),
    source: z.enum(['api', 'smtp']).openapi({ description: 'How the email was submitted: `api` (HTTP) or `smtp` (the SMTP relay).' }),
    body_purged: z.boolean().optional().openapi({
      description: 'True once `BODY_RETENTION_DAYS` has passed and `html`, `text` and attachments were removed; false otherwise. Only `GET /v1/emails/{id}` shows it.',
    }),
    replies: z.array(z.string()).optional().openapi({
      description: 'The received emails (`rcv_…`) that answer this one, oldest first. Only `GET /v1/emails/{id}` shows it.',
    }),
  })
  .openapi('EmailResponse');

/** A list item: the email without its bodies, which only `GET /v1/emails/{id}` returns. */
export const EmailListItem = EmailResponse.omit({ html: true, text: true, body_purged: true, replies: true }).openapi('EmailListItem');

export const EmailList = z
  .object({ data: z.array(EmailListItem), has_more: z.boolean() })
  .openapi('EmailList');

export type EmailRow = {
  id: string;
  status: EmailStatus;
  fromAddress: string;
  toAddresses: string[];
  ccAddresses: string[];
  replyToAddresses: string[];
  subject: string;
  headers: Record<string, string>;
  providerMessageId: string | null;
  sentAt: Date | null;
  deliveredAt: Date | null;
  lastError: string | null;
  scheduledAt: Date | null;
  tags: { name: string; value: string }[];
  openedAt: Date | null;
  clickedAt: Date | null;
  source: 'api' | 'smtp';
  createdAt: Date;
  templateId: string | null;
  templateVersion: number | null;
};

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export type EmailWithBodies = EmailRow & { html: string | null; text: string | null; bodyPurged: boolean };

/** The one mapping from a stored email to what callers see; bcc and attachments never leave. */
export function toEmailListItem(row: EmailRow): z.infer<typeof EmailListItem> {
  return {
    id: row.id,
    status: row.status,
    from: row.fromAddress,
    to: row.toAddresses,
    cc: row.ccAddresses,
    reply_to: row.replyToAddresses,
    subject: row.subject,
    created_at: row.createdAt.toISOString(),
    headers: row.headers,
    provider_message_id: row.providerMessageId,
    sent_at: iso(row.sentAt),
    delivered_at: iso(row.deliveredAt),
    last_error: row.lastError,
    scheduled_at: iso(row.scheduledAt),
    tags: row.tags,
    opened_at: iso(row.openedAt),
    clicked_at: iso(row.clickedAt),
    template: row.templateId ? { id: row.templateId, version: row.templateVersion! } : null,
    source: row.source,
  };
}

export function toEmailResponse(row: EmailWithBodies): z.infer<typeof EmailResponse> {
  return { ...toEmailListItem(row), html: row.html, text: row.text, body_purged: row.bodyPurged };
}
