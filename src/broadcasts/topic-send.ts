import type { Config } from '../platform/config.ts';
import type { Sql } from '../platform/db.ts';
import { isWellFormedId } from '../platform/ids.ts';
import { ValidationError, type ValidationDetail } from '../http/errors.ts';
import { normaliseAddress } from '../suppressions/address.ts';
import { contactUnsubscribeUrl, oneClickHeaders } from './unsubscribe-url.ts';

/**
 * `topic_id` on a single send (`POST /v1/emails`, `/resend/emails`): the topic must be the
 * project's; at send, a recipient who is a contact opted out of it is skipped, and an email to one
 * contact carries the topic's one-click unsubscribe instead of the address-wide one.
 */

export async function assertTopics(sql: Sql, projectId: string, sends: { topicId?: string | null }[], at: (i: number) => (string | number)[]) {
  const problems: ValidationDetail[] = [];
  for (const [i, send] of sends.entries()) {
    if (!send.topicId) continue;
    const [row] = isWellFormedId('topic', send.topicId) ? await sql`select 1 from topics where id = ${send.topicId} and project_id = ${projectId}` : [];
    if (!row) problems.push({ loc: [...at(i), 'topic_id'], msg: 'No topic of this project has that id', type: 'not_found', input: send.topicId });
  }
  if (problems.length) throw new ValidationError(problems);
}

/** The recipients (normalised) who are contacts, with whether each is subscribed to the topic now. */
async function topicContacts(sql: Sql, projectId: string, topicId: string, addresses: string[]) {
  const rows = await sql<{ address: string; contactId: string; subscribed: boolean }[]>`
    select lower(c.email) as address, c.id as contact_id, coalesce(ct.subscription, t.default_subscription) = 'opt_in' as subscribed
    from contacts c join topics t on t.id = ${topicId} and t.project_id = c.project_id
    left join contact_topics ct on ct.contact_id = c.id and ct.topic_id = t.id
    where c.project_id = ${projectId} and lower(c.email) = any(${addresses.map(normaliseAddress)}::text[])`;
  return new Map(rows.map((r) => [r.address, r]));
}

/**
 * The envelope without the contacts opted out of the topic, and the topic's one-click headers when
 * exactly one recipient is left and it is a contact.
 */
export async function applyTopic(config: Config, sql: Sql, projectId: string, topicId: string, envelope: { to: string[]; cc: string[]; bcc: string[] }) {
  const contacts = await topicContacts(sql, projectId, topicId, [...envelope.to, ...envelope.cc, ...envelope.bcc]);
  const keep = (list: string[]) => list.filter((a) => contacts.get(normaliseAddress(a))?.subscribed !== false);
  const kept = { to: keep(envelope.to), cc: keep(envelope.cc), bcc: keep(envelope.bcc) };
  const all = [...kept.to, ...kept.cc, ...kept.bcc];
  const sole = all.length === 1 ? contacts.get(normaliseAddress(all[0]!)) : undefined;
  const url = sole ? contactUnsubscribeUrl(config, { projectId, contactId: sole.contactId, topicId }) : null;
  return { envelope: kept, headers: url ? oneClickHeaders(url) : undefined };
}
