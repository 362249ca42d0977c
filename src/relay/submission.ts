import { simpleParser, type AddressObject, type EmailAddress } from 'mailparser';
import { fieldValues, type HeaderSection } from '../emails/submitted.ts';
import type { Submission } from '../emails/service.ts';
import { FromAddress, Tags, type EmailTag } from '../emails/validate.ts';
import { badMessage } from './reply.ts';

const TAGS_HEADER = 'X-Mailroom-Tags';
const MAX_MESSAGE_ID = 998;

function addresses(a: EmailAddress): string[] {
  if (a.group) return a.group.flatMap(addresses);
  return a.address ? [a.address.toLowerCase()] : [];
}

function listed(header: AddressObject | AddressObject[] | undefined): Set<string> {
  return new Set([header ?? []].flat().flatMap((h) => h.value.flatMap(addresses)));
}

/** Text for the columns the API and dashboard show: PostgreSQL takes neither NUL nor lone surrogates. */
const storable = (s: string) => s.replaceAll('\0', '').toWellFormed();

/** The one From field, validated as the API's `from` is. */
function sender(raw: Buffer, section: HeaderSection): string {
  const from = fieldValues(raw, section, 'from');
  if (from.length === 0) throw badMessage('The message has no From header; it must name one sender, as the API\'s from does');
  if (from.length > 1) throw badMessage('The message has more than one From header');
  const parsed = FromAddress.safeParse(from[0]);
  if (!parsed.success) throw badMessage(`Invalid From header: ${parsed.error.issues[0]!.message}`);
  return parsed.data;
}

/** `X-Mailroom-Tags: name=value, name2=value2`, every such field together, under §10.3's rules. */
function tags(raw: Buffer, section: HeaderSection): EmailTag[] {
  const values = fieldValues(raw, section, TAGS_HEADER);
  if (values.length === 0) return [];
  const pairs = values.join(',').split(',').map((p) => p.trim()).filter(Boolean);
  const list = pairs.map((pair) => {
    const eq = pair.indexOf('=');
    return eq < 0 ? { name: pair, value: '' } : { name: pair.slice(0, eq).trim(), value: pair.slice(eq + 1).trim() };
  });
  const parsed = Tags.safeParse(list);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const at = typeof issue.path[0] === 'number' ? ` (tag ${issue.path[0] + 1}: ${JSON.stringify(pairs[issue.path[0]]!.slice(0, 80))})` : '';
    throw badMessage(`Invalid ${TAGS_HEADER} header${at}: ${issue.message}. Write name=value pairs separated by commas`);
  }
  return parsed.data;
}

/**
 * What a submitted message becomes: the From header as `from`, the RCPT TO addresses split by
 * the To and Cc headers into `to` and `cc` (the rest are `bcc`), tags, and subject and bodies
 * read by mailparser for the API and the dashboard. The message itself is kept as submitted.
 */
export async function readSubmission(raw: Buffer, section: HeaderSection, recipients: string[]): Promise<Submission> {
  const from = sender(raw, section);
  const tagList = tags(raw, section);
  const messageId = fieldValues(raw, section, 'message-id')[0] || undefined;
  // It keys the retry dedupe's index, whose entries must stay small.
  if (messageId && messageId.length > MAX_MESSAGE_ID) throw badMessage(`Invalid Message-ID header: longer than ${MAX_MESSAGE_ID} characters`);
  const mail = await simpleParser(raw, {
    skipHtmlToText: true,
    skipTextToHtml: true,
    skipTextLinks: true,
    skipImageLinks: true,
    keepCidLinks: true,
    checksumAlgo: false,
  });
  const inTo = listed(mail.to);
  const inCc = listed(mail.cc);
  const to: string[] = [];
  const cc: string[] = [];
  const bcc: string[] = [];
  for (const r of recipients) {
    const lower = r.toLowerCase();
    (inTo.has(lower) ? to : inCc.has(lower) ? cc : bcc).push(r);
  }
  return {
    from,
    to,
    cc,
    bcc,
    replyTo: [...listed(mail.replyTo)],
    subject: storable(mail.subject ?? ''),
    html: typeof mail.html === 'string' ? storable(mail.html) : null,
    text: mail.text ? storable(mail.text) : null,
    headers: {},
    attachments: [],
    tags: tagList,
    submitted: { raw, messageId },
  };
}
