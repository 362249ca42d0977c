import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { AddressObject, AttachmentStream, Headers, MessageText } from 'mailparser';
import EmailReplyParser from 'email-reply-parser';
import { declaredType, headerObject, mailboxes } from '../sink/parse.ts';
import { loadMailparser } from '../platform/mailparser.ts';

export type ReceivedAttachment = {
  id: string;
  /** Position among the message's attachments, as mailparser yields them: how a download finds it again. */
  index: number;
  filename: string | null;
  size: number;
  content_type: string;
  content_id: string | null;
  content_disposition: string | null;
};

export type ParsedReceived = {
  from: string;
  to: string[];
  cc: string[];
  replyTo: string[];
  subject: string;
  messageId: string | null;
  inReplyTo: string | null;
  references: string[];
  html: string | null;
  text: string | null;
  strippedText: string | null;
  headers: Record<string, string>;
  attachments: ReceivedAttachment[];
  isAutoReply: boolean;
  isBounce: boolean;
  size: number;
};

/** Header fields kept in `headers`: a message with more is cut there (the budget a loop over it carries). */
const MAX_HEADER_LINES = 1000;
/** The bodies kept; past these a body is cut, so one message's text cannot take the worker's memory. */
const MAX_BODY_CHARS = 8 * 1024 * 1024;

const MESSAGE_ID = /<[^<>\s]+>/g;

/** Message-IDs in a header value, `<…>` each, in order; mailparser gives a string or an array. */
export function messageIds(value: unknown): string[] {
  const text = Array.isArray(value) ? value.join(' ') : typeof value === 'string' ? value : '';
  return [...text.matchAll(MESSAGE_ID)].map((m) => m[0]).slice(0, 200);
}

function headerText(headers: Headers, name: string): string {
  const v = headers.get(name);
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object' && 'value' in v && typeof (v as { value: unknown }).value === 'string') return (v as { value: string }).value;
  return '';
}

/**
 * Answering machines (§20.6): Auto-Submitted other than `no` (RFC 3834), X-Autoreply, or a
 * Precedence of auto_reply, bulk or junk.
 */
export function autoReply(headers: Headers): boolean {
  const autoSubmitted = headerText(headers, 'auto-submitted').trim().toLowerCase();
  if (autoSubmitted && autoSubmitted !== 'no') return true;
  if (headers.has('x-autoreply')) return true;
  return ['auto_reply', 'bulk', 'junk'].includes(headerText(headers, 'precedence').trim().toLowerCase());
}

/** A delivery status report (RFC 3464), or mail from the MAILER-DAEMON. */
export function bounce(headers: Headers, from: string): boolean {
  const type = headers.get('content-type') as { value?: string; params?: Record<string, string> } | undefined;
  if (type?.value?.toLowerCase() === 'multipart/report' && type.params?.['report-type']?.toLowerCase() === 'delivery-status') return true;
  return /(^|<)mailer-daemon@/i.test(from);
}

/** The reply without its quoted history and signature (email-reply-parser, see docs/inbound.md). */
export function stripReply(text: string | null): string | null {
  if (!text) return null;
  try {
    return new EmailReplyParser().parseReply(text).trim() || null;
  } catch {
    return null;
  }
}

/**
 * Parses a message as it streams in, with mailparser. Attachments are counted and dropped as
 * they pass, never held: a download parses the message again and keeps only the one asked for
 * (download.ts). So the largest message costs its bodies' text, not its size.
 */
export async function parseReceived(source: Readable, newAttachmentId: () => string, maxBytes = Infinity): Promise<ParsedReceived> {
  const { MailParser } = await loadMailparser();
  const parser = new MailParser({ skipHtmlToText: true, skipTextToHtml: true, skipTextLinks: true, keepCidLinks: true, checksumAlgo: false } as never);
  let headers: Headers = new Map();
  let lines: { key: string; line: string }[] = [];
  let html: string | null = null;
  let text: string | null = null;
  let size = 0;
  const attachments: ReceivedAttachment[] = [];
  source.on('data', (chunk: Buffer) => {
    size += chunk.length;
    // An object whose length was not said ahead is stopped where it passes the limit.
    if (size > maxBytes) source.destroy(new Error(`the message passed ${maxBytes} bytes`));
  });
  parser.on('headers', (h: Headers) => { headers = h; });
  parser.on('headerLines', (l: { key: string; line: string }[]) => { lines = l.slice(0, MAX_HEADER_LINES); });
  parser.on('data', (data: AttachmentStream | MessageText) => {
    if (data.type === 'text') {
      if (typeof data.html === 'string') html = data.html.slice(0, MAX_BODY_CHARS);
      if (data.text) text = data.text.slice(0, MAX_BODY_CHARS);
      return;
    }
    const entry: ReceivedAttachment = {
      id: newAttachmentId(),
      index: attachments.length,
      filename: data.filename ?? null,
      size: 0,
      content_type: declaredType(data.headers.get('content-type')) ?? data.contentType,
      content_id: data.cid ? `<${data.cid}>` : null,
      content_disposition: data.contentDisposition ?? null,
    };
    attachments.push(entry);
    data.content.on('data', (chunk: Buffer) => { entry.size += chunk.length; });
    data.content.on('end', () => data.release?.());
  });
  await pipeline(source, parser);
  const from = mailboxes(headers.get('from') as AddressObject | undefined).join(', ');
  return {
    from,
    to: mailboxes(headers.get('to') as AddressObject | undefined),
    cc: mailboxes(headers.get('cc') as AddressObject | undefined),
    replyTo: mailboxes(headers.get('reply-to') as AddressObject | undefined),
    subject: headerText(headers, 'subject'),
    messageId: messageIds(headers.get('message-id'))[0] ?? null,
    inReplyTo: messageIds(headers.get('in-reply-to'))[0] ?? null,
    references: messageIds(headers.get('references')),
    html,
    text,
    strippedText: stripReply(text),
    headers: headerObject(lines),
    attachments,
    isAutoReply: autoReply(headers),
    isBounce: bounce(headers, from),
    size,
  };
}
