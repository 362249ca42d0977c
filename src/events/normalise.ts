import { z } from 'zod';
import { sha256 } from '../platform/crypto.ts';
import type { EventType } from './record.ts';
import { isMachineAgent, storedUserAgent } from './user-agents.ts';

/**
 * One SES notification as published through a configuration set (`eventType`) or through an
 * identity's notification topics (the older `notificationType`). Unknown fields are dropped.
 */
const recipient = z.object({ emailAddress: z.string().min(1), diagnosticCode: z.string().nullish() });
const SesRecord = z.object({
  eventType: z.string().optional(),
  notificationType: z.string().optional(),
  mail: z.object({ messageId: z.string().min(1), timestamp: z.string().optional(), destination: z.array(z.string()).default([]) }),
  delivery: z.object({
    timestamp: z.string().optional(),
    recipients: z.array(z.string()).default([]),
    smtpResponse: z.string().nullish(),
  }).optional(),
  deliveryDelay: z.object({
    timestamp: z.string().optional(),
    delayType: z.string().nullish(),
    delayedRecipients: z.array(recipient).default([]),
  }).optional(),
  bounce: z.object({
    timestamp: z.string().optional(),
    feedbackId: z.string().optional(),
    bounceType: z.string(),
    bounceSubType: z.string().nullish(),
    bouncedRecipients: z.array(recipient).default([]),
  }).optional(),
  complaint: z.object({
    timestamp: z.string().optional(),
    feedbackId: z.string().optional(),
    complaintFeedbackType: z.string().nullish(),
    complainedRecipients: z.array(recipient).default([]),
  }).optional(),
  reject: z.object({ reason: z.string().nullish() }).optional(),
  // The client's ipAddress is in both, and deliberately never read.
  open: z.object({ timestamp: z.string().optional(), userAgent: z.string().nullish() }).optional(),
  click: z.object({ timestamp: z.string().optional(), userAgent: z.string().nullish(), link: z.string() }).optional(),
  failure: z.object({ errorMessage: z.string().nullish(), templateName: z.string().nullish() }).optional(),
});
type SesRecord = z.infer<typeof SesRecord>;

export type NormalisedEvent = {
  kind: 'event';
  /** `mail.messageId`, the email's `provider_message_id`. */
  providerMessageId: string;
  /** `mail.timestamp`: when SES took the message, shortly after the email was made (or its schedule came). */
  sentAt?: Date;
  type: EventType;
  data: Record<string, unknown>;
  /** The same notification delivered twice (SNS or SQS retries, two pollers) yields the same key. */
  dedupeKey: string;
  deliveredAt?: Date;
  suppress?: { addresses: string[]; reason: 'bounced' | 'complained' };
  /** An open or a click: the first of each is the email's `opened_at` or `clicked_at`. */
  engagedAt?: Date;
};
export type Normalised = NormalisedEvent | { kind: 'ignored'; reason: string } | { kind: 'invalid' };

const BOUNCE_TYPES: Record<string, 'permanent' | 'transient' | 'undetermined'> = {
  Permanent: 'permanent',
  Transient: 'transient',
  Undetermined: 'undetermined',
};

/** Distinct diagnostics of the recipients, in order; SES usually gives one per recipient. */
function diagnostics(recipients: { diagnosticCode?: string | null }[]): string {
  return [...new Set(recipients.map((r) => r.diagnosticCode?.trim()).filter(Boolean))].join('\n');
}

function dedupeKey(sesType: string, record: SesRecord, timestamp: string | undefined, recipients: string[], extra = '') {
  const parts = [sesType, record.mail.messageId, timestamp ?? record.mail.timestamp ?? '', [...recipients].sort(), extra];
  return `ses:${sha256(JSON.stringify(parts)).toString('hex')}`;
}

function validDate(value: string | undefined): Date | undefined {
  const date = value ? new Date(value) : undefined;
  return date && !Number.isNaN(date.getTime()) ? date : undefined;
}

/**
 * Maps one SES record onto at most one of our event types. `Send` is ignored because the
 * worker emits `email.sent` itself when SES accepts the message; anything unknown is ignored too.
 * `Open` and `Click` (from a configuration set that tracks them) become `email.opened` and
 * `email.clicked`, the same as Mailroom's own tracking records, without the client's address.
 */
export function normaliseSesEvent(raw: unknown): Normalised {
  const parsed = SesRecord.safeParse(raw);
  if (!parsed.success) return { kind: 'invalid' };
  const record = parsed.data;
  const sesType = record.eventType ?? record.notificationType;
  const providerMessageId = record.mail.messageId;
  const base = { kind: 'event' as const, providerMessageId, sentAt: validDate(record.mail.timestamp) };

  switch (sesType) {
    case 'Delivery': {
      const d = record.delivery;
      if (!d) return { kind: 'invalid' };
      return {
        ...base,
        type: 'email.delivered',
        data: { to: d.recipients, smtp_response: d.smtpResponse ?? '' },
        dedupeKey: dedupeKey(sesType, record, d.timestamp, d.recipients),
        deliveredAt: validDate(d.timestamp) ?? new Date(),
      };
    }
    case 'DeliveryDelay': {
      const d = record.deliveryDelay;
      if (!d) return { kind: 'invalid' };
      const to = d.delayedRecipients.map((r) => r.emailAddress);
      return {
        ...base,
        type: 'email.delivery_delayed',
        data: { to, delay_type: d.delayType ?? '', diagnostic: diagnostics(d.delayedRecipients) },
        dedupeKey: dedupeKey(sesType, record, d.timestamp, to),
      };
    }
    case 'Bounce': {
      const b = record.bounce;
      if (!b) return { kind: 'invalid' };
      const to = b.bouncedRecipients.map((r) => r.emailAddress);
      const bounceType = BOUNCE_TYPES[b.bounceType] ?? 'undetermined';
      return {
        ...base,
        type: 'email.bounced',
        data: { to, bounce_type: bounceType, bounce_subtype: b.bounceSubType ?? '', diagnostic: diagnostics(b.bouncedRecipients) },
        dedupeKey: dedupeKey(sesType, record, b.timestamp, to, b.feedbackId),
        ...(bounceType === 'permanent' ? { suppress: { addresses: to, reason: 'bounced' as const } } : {}),
      };
    }
    case 'Complaint': {
      const c = record.complaint;
      if (!c) return { kind: 'invalid' };
      const to = c.complainedRecipients.map((r) => r.emailAddress);
      return {
        ...base,
        type: 'email.complained',
        data: { to, feedback_type: c.complaintFeedbackType ?? null },
        dedupeKey: dedupeKey(sesType, record, c.timestamp, to, c.feedbackId),
        suppress: { addresses: to, reason: 'complained' },
      };
    }
    // SES refused the message after accepting the API call (a virus, say) or could not render
    // its template: nothing was delivered to anyone.
    case 'Reject':
      return {
        ...base,
        type: 'email.failed',
        data: { reason: 'message_rejected', message: `The provider rejected the message${record.reject?.reason ? `: ${record.reject.reason}` : '.'}` },
        dedupeKey: dedupeKey(sesType, record, undefined, []),
      };
    case 'RenderingFailure':
      return {
        ...base,
        type: 'email.failed',
        data: { reason: 'message_rejected', message: `The provider could not render the message${record.failure?.errorMessage ? `: ${record.failure.errorMessage}` : '.'}` },
        dedupeKey: dedupeKey(sesType, record, undefined, []),
      };
    case 'Open': {
      const o = record.open;
      if (!o) return { kind: 'invalid' };
      const userAgent = storedUserAgent(o.userAgent);
      return {
        ...base,
        type: 'email.opened',
        data: { to: record.mail.destination, user_agent: userAgent, machine: isMachineAgent(o.userAgent) },
        dedupeKey: dedupeKey(sesType, record, o.timestamp, [], userAgent),
        engagedAt: validDate(o.timestamp) ?? new Date(),
      };
    }
    case 'Click': {
      const k = record.click;
      if (!k) return { kind: 'invalid' };
      const userAgent = storedUserAgent(k.userAgent);
      return {
        ...base,
        type: 'email.clicked',
        data: { to: record.mail.destination, link: k.link, user_agent: userAgent, machine: isMachineAgent(k.userAgent) },
        dedupeKey: dedupeKey(sesType, record, k.timestamp, [], `${userAgent}\n${k.link}`),
        engagedAt: validDate(k.timestamp) ?? new Date(),
      };
    }
    default:
      return { kind: 'ignored', reason: sesType ?? 'no event type' };
  }
}

/**
 * The SES record inside an SQS message body: an SNS envelope whose `Message` is the SES JSON,
 * or the SES JSON itself when the subscription uses raw message delivery.
 */
export function unwrapSesRecord(body: string): unknown {
  let outer: unknown;
  try {
    outer = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (outer && typeof outer === 'object' && 'Type' in outer && 'Message' in outer) {
    const message = (outer as { Message: unknown }).Message;
    if (typeof message !== 'string') return undefined;
    try {
      return JSON.parse(message);
    } catch {
      return undefined;
    }
  }
  return outer;
}
