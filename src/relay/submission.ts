import addressparser from 'nodemailer/lib/addressparser';
import { fieldValues, type HeaderSection } from '../emails/submitted.ts';
import type { Submission } from '../emails/service.ts';
import { FromAddress, Tags, type EmailTag } from '../emails/validate.ts';
import { isMailbox } from '../emails/mailbox.ts';
import { badMessage } from './reply.ts';
import { decodeWords, isMimeRefusal } from '../platform/mime-pool.ts';

const TAGS_HEADER = 'X-Mailroom-Tags';
const MAX_MESSAGE_ID = 998;

type Address = { address?: string; group?: Address[] };

function addresses(a: Address): string[] {
  if (a.group) return a.group.flatMap(addresses);
  return a.address ? [a.address.toLowerCase()] : [];
}

/** The addresses of every field called `name`, lower-cased, as mailparser reads them. */
function listed(raw: Buffer, section: HeaderSection, name: string): Set<string> {
  return new Set(fieldValues(raw, section, name).flatMap((value) => addressparser(value).flatMap(addresses)));
}

/** The API's limits on the fields a relayed message shares with `POST /v1/emails`. */
const MAX_SUBJECT = 998;
const MAX_REPLY_TO = 50;

/** Reply-To as the API takes it: at most 50 mailboxes, each valid. */
function replyToAddresses(raw: Buffer, section: HeaderSection): string[] {
  const fields = fieldValues(raw, section, 'reply-to');
  if (fields.length > 1) throw badMessage('The message has more than one Reply-To header');
  if (fields.length === 0) return [];
  const list: string[] = addressparser(fields[0]!).flatMap(addresses);
  if (list.length > MAX_REPLY_TO) throw badMessage(`Invalid Reply-To header: more than ${MAX_REPLY_TO} addresses, the API's limit`);
  const bad = list.find((a) => !isMailbox(a));
  if (bad !== undefined || list.length === 0) throw badMessage(`Invalid Reply-To header: ${bad === undefined ? 'no address' : `${JSON.stringify(bad.slice(0, 80))} is not a valid address`}`);
  return [...new Set(list)];
}

/** The Subject field, its RFC 2047 encoded words decoded (in the MIME pool, §22.1). */
async function subject(raw: Buffer, section: HeaderSection): Promise<string> {
  const value = fieldValues(raw, section, 'subject')[0];
  if (value === undefined) return '';
  // Plain ASCII has no encoded word to decode: no trip to the pool.
  if (!value.includes('=?')) return value;
  // One over its parse budget keeps the Subject as written; the message is still accepted.
  return decodeWords(value).catch((err: unknown) => {
    if (isMimeRefusal(err)) return value;
    throw err;
  });
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
 * the To and Cc headers into `to` and `cc` (the rest are `bcc`), the subject and tags, all read
 * from the header section alone. The bodies are read by the caller, in the MIME pool
 * (submittedBodies). The message itself is kept as submitted.
 */
export async function readSubmission(raw: Buffer, section: HeaderSection, recipients: string[]): Promise<Submission> {
  const from = sender(raw, section);
  const tagList = tags(raw, section);
  const messageId = fieldValues(raw, section, 'message-id')[0] || undefined;
  // It keys the retry dedupe's index, whose entries must stay small.
  if (messageId && Buffer.byteLength(messageId) > MAX_MESSAGE_ID) throw badMessage(`Invalid Message-ID header: longer than ${MAX_MESSAGE_ID} bytes`);
  const subjectText = storable(await subject(raw, section));
  if (subjectText.length > MAX_SUBJECT) throw badMessage(`Invalid Subject header: longer than ${MAX_SUBJECT} characters unfolded, the API's limit`);
  const replyTo = replyToAddresses(raw, section);
  const inTo = listed(raw, section, 'to');
  const inCc = listed(raw, section, 'cc');
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
    replyTo,
    subject: subjectText,
    html: null,
    text: null,
    headers: {},
    attachments: [],
    tags: tagList,
    submitted: { raw, messageId },
  };
}
