/**
 * Pure readings of header values already parsed, shared by the MIME thread (mime-worker.ts) and
 * the event loop (a notification's headers). Nothing here parses MIME.
 */

/** A mailbox as mailparser yields it: a name and an address, or a group of them. */
export type Mailbox = { name?: string; address?: string; group?: Mailbox[] };
/** An address field as mailparser yields it. */
export type AddressField = { value: Mailbox[] };
/** Parsed header values by lower-cased name, as mailparser yields them. */
export type HeaderMap = Map<string, unknown>;

const NEEDS_QUOTES = /[()<>[\]:;@\\,."]/;

function formatMailbox(a: Mailbox): string[] {
  if (a.group) return a.group.flatMap(formatMailbox);
  if (!a.address) return [];
  if (!a.name) return [a.address];
  const name = NEEDS_QUOTES.test(a.name) ? `"${a.name.replace(/(["\\])/g, '\\$1')}"` : a.name;
  return [`${name} <${a.address}>`];
}

export function mailboxes(header: AddressField | AddressField[] | undefined): string[] {
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

export function declaredType(header: unknown): string | undefined {
  const value = typeof header === 'object' && header !== null ? (header as { value?: unknown }).value : header;
  return typeof value === 'string' && value.includes('/') ? value.toLowerCase() : undefined;
}

const MESSAGE_ID = /<[^<>\s]+>/g;

/** Message-IDs in a header value, `<…>` each, in order; mailparser gives a string or an array. */
export function messageIds(value: unknown): string[] {
  const text = Array.isArray(value) ? value.join(' ') : typeof value === 'string' ? value : '';
  return [...text.matchAll(MESSAGE_ID)].map((m) => m[0]).slice(0, 200);
}

function headerText(headers: HeaderMap, name: string): string {
  const v = headers.get(name);
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object' && 'value' in v && typeof (v as { value: unknown }).value === 'string') return (v as { value: string }).value;
  return '';
}

export const subjectOf = (headers: HeaderMap) => headerText(headers, 'subject');

/**
 * Answering machines (§20.6): Auto-Submitted other than `no` (RFC 3834), X-Autoreply, or a
 * Precedence of auto_reply, bulk or junk.
 */
export function autoReply(headers: HeaderMap): boolean {
  const autoSubmitted = headerText(headers, 'auto-submitted').trim().toLowerCase();
  if (autoSubmitted && autoSubmitted !== 'no') return true;
  if (headers.has('x-autoreply')) return true;
  return ['auto_reply', 'bulk', 'junk'].includes(headerText(headers, 'precedence').trim().toLowerCase());
}

/** A delivery status report (RFC 3464), or mail from the MAILER-DAEMON. */
export function bounce(headers: HeaderMap, from: string): boolean {
  const type = headers.get('content-type') as { value?: string; params?: Record<string, string> } | undefined;
  if (type?.value?.toLowerCase() === 'multipart/report' && type.params?.['report-type']?.toLowerCase() === 'delivery-status') return true;
  return /(^|<)mailer-daemon@/i.test(from);
}
