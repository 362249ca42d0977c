import { z } from 'zod';
import type { ParsedReceived } from './parse.ts';
import { messageIds } from './parse.ts';

const verdict = z.object({ status: z.string().max(100) }).optional();

/**
 * SES's `Received` notification (receipt rules): the message's envelope and first headers in
 * `mail`, the verdicts and the action in `receipt`, and for an SNS action the message itself in
 * `content`. Unknown fields are dropped.
 */
export const ReceivedNotification = z.object({
  notificationType: z.literal('Received'),
  mail: z.object({
    messageId: z.string().min(1).max(200),
    timestamp: z.string().optional(),
    source: z.string().max(1000).optional(),
    destination: z.array(z.string().max(1000)).max(1000).default([]),
    headers: z.array(z.object({ name: z.string().max(1000), value: z.string().max(100_000) })).max(1000).default([]),
    commonHeaders: z.object({
      from: z.array(z.string()).max(100).optional(),
      to: z.array(z.string()).max(1000).optional(),
      cc: z.array(z.string()).max(1000).optional(),
      replyTo: z.array(z.string()).max(100).optional(),
      messageId: z.string().optional(),
      subject: z.string().optional(),
    }).partial().default({}),
  }),
  receipt: z.object({
    recipients: z.array(z.string().max(1000)).max(1000).default([]),
    spfVerdict: verdict,
    dkimVerdict: verdict,
    dmarcVerdict: verdict,
    spamVerdict: verdict,
    virusVerdict: verdict,
    action: z.discriminatedUnion('type', [
      z.object({ type: z.literal('S3'), bucketName: z.string().min(1).max(255), objectKey: z.string().min(1).max(1024) }),
      z.object({ type: z.literal('SNS'), encoding: z.enum(['UTF8', 'BASE64']).default('UTF8') }),
    ]),
  }),
  content: z.string().optional(),
});
export type ReceivedNotification = z.infer<typeof ReceivedNotification>;

export type Verdicts = { spf: string; dkim: string; dmarc: string; spam: string; virus: string };

/** SES's `PASS`, `FAIL`, `GRAY`, `PROCESSING_FAILED`, `DISABLED`, lower-cased; a missing one was not run. */
export function verdictsOf(receipt: ReceivedNotification['receipt']): Verdicts {
  const of = (v: { status: string } | undefined) => (v?.status ?? 'DISABLED').toLowerCase();
  return { spf: of(receipt.spfVerdict), dkim: of(receipt.dkimVerdict), dmarc: of(receipt.dmarcVerdict), spam: of(receipt.spamVerdict), virus: of(receipt.virusVerdict) };
}

export const DISABLED_VERDICTS: Verdicts = { spf: 'disabled', dkim: 'disabled', dmarc: 'disabled', spam: 'disabled', virus: 'disabled' };

/**
 * A message too large to fetch (§20.2) is stored from what the notification carries: SES's
 * common headers and the header list (SES cuts the list when `headersTruncated`).
 */
export function parsedFromNotification(n: ReceivedNotification): ParsedReceived {
  const headers: Record<string, string> = {};
  for (const h of n.mail.headers) headers[h.name] = headers[h.name] === undefined ? h.value : `${headers[h.name]}\n${h.value}`;
  const header = (name: string) => n.mail.headers.find((h) => h.name.toLowerCase() === name)?.value;
  const common = n.mail.commonHeaders;
  const autoSubmitted = header('auto-submitted')?.trim().toLowerCase();
  const from = common.from?.join(', ') ?? n.mail.source ?? '';
  return {
    from,
    to: common.to ?? [],
    cc: common.cc ?? [],
    replyTo: common.replyTo ?? [],
    subject: common.subject ?? '',
    messageId: messageIds(common.messageId ?? header('message-id'))[0] ?? null,
    inReplyTo: messageIds(header('in-reply-to'))[0] ?? null,
    references: messageIds(header('references')),
    html: null,
    text: null,
    strippedText: null,
    headers,
    attachments: [],
    isAutoReply: Boolean(autoSubmitted && autoSubmitted !== 'no') || header('x-autoreply') !== undefined
      || ['auto_reply', 'bulk', 'junk'].includes(header('precedence')?.trim().toLowerCase() ?? ''),
    isBounce: /(^|<)mailer-daemon@/i.test(from) || /multipart\/report[^]*report-type="?delivery-status/i.test(header('content-type') ?? ''),
    size: 0,
  };
}
