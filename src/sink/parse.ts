import type { AddressObject, EmailAddress } from 'mailparser';
import { loadMailparser } from '../platform/mailparser.ts';

export type ParsedSinkMessage = {
  fromAddress: string;
  toAddresses: string[];
  ccAddresses: string[];
  subject: string;
  text: string | null;
  html: string | null;
  headers: Record<string, string>;
  attachments: { filename: string | null; content_type: string; size_bytes: number }[];
};

const NEEDS_QUOTES = /[()<>[\]:;@\\,."]/;

function formatMailbox(a: EmailAddress): string[] {
  if (a.group) return a.group.flatMap(formatMailbox);
  if (!a.address) return [];
  if (!a.name) return [a.address];
  const name = NEEDS_QUOTES.test(a.name) ? `"${a.name.replace(/(["\\])/g, '\\$1')}"` : a.name;
  return [`${name} <${a.address}>`];
}

export function mailboxes(header: AddressObject | AddressObject[] | undefined): string[] {
  return [header ?? []].flat().flatMap((h) => h.value.flatMap(formatMailbox));
}

/**
 * Header values as they arrived (unfolded, not decoded), under the name's first spelling.
 * A header that appears more than once has its values joined with a newline, which an
 * unfolded value can never contain.
 */
export function headerObject(lines: readonly { key: string; line: string }[]): Record<string, string> {
  const byKey = new Map<string, { name: string; values: string[] }>();
  for (const { key, line } of lines) {
    const unfolded = line.replace(/\r?\n(?=[ \t])/g, '');
    const colon = unfolded.indexOf(':');
    if (colon < 0) continue;
    const entry = byKey.get(key) ?? { name: unfolded.slice(0, colon).trim(), values: [] };
    entry.values.push(unfolded.slice(colon + 1).trim());
    byKey.set(key, entry);
  }
  return Object.fromEntries([...byKey.values()].map((e) => [e.name, e.values.join('\n')]));
}

/**
 * Parses a caught message with mailparser. Bodies are kept as sent: no text made up from HTML,
 * no cid: links rewritten, so what the API shows is what a receiver would get.
 */
export async function parseSinkMessage(raw: Buffer, envelope: { from: string; recipients: string[] }): Promise<ParsedSinkMessage> {
  const { simpleParser } = await loadMailparser();
  const mail = await simpleParser(raw, {
    skipHtmlToText: true,
    skipTextToHtml: true,
    skipTextLinks: true,
    keepCidLinks: true,
    checksumAlgo: false,
  });
  const to = mailboxes(mail.to);
  const cc = mailboxes(mail.cc);
  return {
    fromAddress: mailboxes(mail.from).join(', ') || envelope.from,
    // A message with neither To nor Cc (all Bcc, or a bare SMTP client) still shows who got it.
    toAddresses: to.length || cc.length ? to : envelope.recipients,
    ccAddresses: cc,
    subject: mail.subject ?? '',
    // With no plain text part mailparser reports '' (skipHtmlToText); that is no text at all.
    text: mail.text || null,
    html: typeof mail.html === 'string' ? mail.html : null,
    headers: headerObject(mail.headerLines),
    attachments: mail.attachments.map((a) => ({
      filename: a.filename ?? null,
      // mailparser guesses a type from the file name; report the one the message declares.
      content_type: declaredType(a.headers.get('content-type')) ?? a.contentType,
      size_bytes: a.size,
    })),
  };
}

export function declaredType(header: unknown): string | undefined {
  const value = typeof header === 'object' && header !== null ? (header as { value?: unknown }).value : header;
  return typeof value === 'string' && value.includes('/') ? value.toLowerCase() : undefined;
}
