import { randomUUID } from 'node:crypto';
import MailComposer from 'nodemailer/lib/mail-composer';
import addressparser from 'nodemailer/lib/addressparser';

/** A message as the caller described it; the one shape validation, storage and composition share. */
export type EmailContent = {
  from: string;
  to: string[];
  cc: string[];
  bcc: string[];
  replyTo: string[];
  subject: string;
  html: string | null;
  text: string | null;
  headers: Record<string, string>;
  attachments: { filename: string; contentType: string; content: string /* base64 */; contentId?: string }[];
};

export type ComposeInput = EmailContent & {
  /** e.g. '<email_xxx@mailroom>'; one is generated when absent. */
  messageId?: string;
  /** Adds List-Unsubscribe and List-Unsubscribe-Post (RFC 8058) unless the caller set List-Unsubscribe. */
  listUnsubscribeUrl?: string;
};

const hasHeader = (headers: Record<string, string>, name: string) =>
  Object.keys(headers).some((k) => k.toLowerCase() === name.toLowerCase());

/** The sender's domain makes a Message-ID that receivers don't flag as foreign. */
function generatedMessageId(from: string): string {
  const [first] = addressparser(from, { flatten: true });
  const domain = first?.address.split('@')[1] || 'mailroom';
  return `<${randomUUID()}@${domain}>`;
}

/**
 * Assembles the raw RFC 5322 message the provider (or the sink) receives. MailComposer leaves
 * the Bcc header out (no keepBcc), so hidden recipients only ever appear in the SMTP envelope.
 */
export async function composeMime(input: ComposeInput): Promise<Buffer> {
  const headers: Record<string, string> = { ...input.headers };
  if (input.listUnsubscribeUrl && !hasHeader(headers, 'List-Unsubscribe')) {
    headers['List-Unsubscribe'] = `<${input.listUnsubscribeUrl}>`;
    if (!hasHeader(headers, 'List-Unsubscribe-Post')) headers['List-Unsubscribe-Post'] = 'List-Unsubscribe=One-Click';
  }
  const composer = new MailComposer({
    from: input.from,
    to: input.to,
    cc: input.cc.length ? input.cc : undefined,
    bcc: input.bcc.length ? input.bcc : undefined,
    replyTo: input.replyTo.length ? input.replyTo : undefined,
    subject: input.subject,
    messageId: input.messageId ?? generatedMessageId(input.from),
    text: input.text ?? undefined,
    html: input.html ?? undefined,
    headers,
    attachments: input.attachments.map((a) => ({
      filename: a.filename,
      contentType: a.contentType,
      content: a.content,
      encoding: 'base64',
      // An inline part: MailComposer gives it `Content-ID: <cid>` and puts it in multipart/related.
      ...(a.contentId ? { cid: a.contentId } : {}),
    })),
    // Content only ever comes from the request; never let a value be read as a path or URL.
    disableFileAccess: true,
    disableUrlAccess: true,
    newline: 'win',
    // From the UUID generator's cached entropy: MailComposer would otherwise read the system's
    // random source for it on every message.
    baseBoundary: randomUUID().replaceAll('-', ''),
  });
  return composer.compile().build();
}
