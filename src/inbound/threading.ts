import type { TxSql } from '../platform/db.ts';
import { isWellFormedId } from '../platform/ids.ts';
import { messageIds } from './parse.ts';

/** Message-IDs of a chain looked at, at most: References of a long thread are cut to its newest. */
const MAX_CANDIDATES = 50;

export type Parent = { emailId: string; threadId: string };

/** `<local@domain>` as its two halves. */
function split(messageId: string) {
  const inner = messageId.slice(1, -1);
  const at = inner.lastIndexOf('@');
  return at < 0 ? { local: inner, domain: '' } : { local: inner.slice(0, at), domain: inner.slice(at + 1).toLowerCase() };
}

/**
 * The thread a sent email belongs to: the thread of the received email it answered (its
 * In-Reply-To, set by the application when it replied), else its own id.
 */
async function threadOfSent(tx: TxSql, projectId: string, emailId: string, headers: Record<string, unknown>): Promise<string> {
  const inReplyTo = Object.entries(headers ?? {}).find(([k]) => k.toLowerCase() === 'in-reply-to')?.[1];
  const ids = messageIds(typeof inReplyTo === 'string' ? inReplyTo : '');
  if (!ids.length) return emailId;
  const [row] = await tx<[{ threadId: string }?]>`
    select thread_id from received_emails where project_id = ${projectId} and message_id_header = any(${ids}::text[]) order by id limit 1`;
  return row?.threadId ?? emailId;
}

/**
 * The email a message answers (§20.5): In-Reply-To, else References from the newest back. Each
 * Message-ID is matched against the ones Mailroom gave its sent emails (`<email_…@domain>`, or
 * the client's own through the relay), the one SES put on them (`<provider id@…amazonses.com>`,
 * since SES rewrites the Message-ID) and those of earlier received emails.
 */
export async function findParent(tx: TxSql, projectId: string, inReplyTo: string | null, references: string[]): Promise<Parent | undefined> {
  const candidates = [...new Set(inReplyTo ? [inReplyTo] : [...references].reverse())].slice(0, MAX_CANDIDATES);
  if (!candidates.length) return undefined;
  const parts = candidates.map(split);
  const ownIds = parts.map((p) => p.local).filter((l) => isWellFormedId('email', l));
  const sesIds = parts.filter((p) => p.domain === 'amazonses.com' || p.domain.endsWith('.amazonses.com')).map((p) => p.local);
  const sent = await tx<{ id: string; headers: Record<string, unknown>; providerMessageId: string | null; messageIdHeader: string | null }[]>`
    select id, headers, provider_message_id, message_id_header from emails
    where project_id = ${projectId}
      and (id = any(${ownIds}::text[]) or provider_message_id = any(${sesIds}::text[]) or message_id_header = any(${candidates}::text[]))
    limit ${MAX_CANDIDATES * 2}`;
  const received = await tx<{ id: string; threadId: string; messageIdHeader: string }[]>`
    select id, thread_id, message_id_header from received_emails
    where project_id = ${projectId} and message_id_header = any(${candidates}::text[])
    order by id limit ${MAX_CANDIDATES}`;
  for (const [i, candidate] of candidates.entries()) {
    const { local } = parts[i]!;
    const s = sent.find((e) => e.id === local || e.providerMessageId === local || e.messageIdHeader === candidate);
    if (s) return { emailId: s.id, threadId: await threadOfSent(tx, projectId, s.id, s.headers) };
    const r = received.find((e) => e.messageIdHeader === candidate);
    if (r) return { emailId: r.id, threadId: r.threadId };
  }
  return undefined;
}
