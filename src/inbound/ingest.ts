import { Readable } from 'node:stream';
import type { Config } from '../platform/config.ts';
import type { Sql } from '../platform/db.ts';
import type { Logger } from '../platform/log.ts';
import { newId } from '../platform/ids.ts';
import { isMimeRefusal } from '../platform/mime-pool.ts';
import { recordInboundParseFailed } from '../platform/metrics.ts';
import type { ObjectStore } from '../providers/s3.ts';
import { ReceivedNotification, parsedFromNotification, verdictsOf } from './notification.ts';
import { parseReceived, type ParsedReceived } from './parse.ts';
import { projectsReceivingAt } from './queries.ts';
import { storeReceived, type Incoming, type Target } from './store.ts';

export type ReceivedOutcome = 'stored' | 'duplicate' | 'no_project' | 'invalid';

export const newAttachmentId = () => newId('receivedAttachment');

const domainOf = (address: string) => address.slice(address.lastIndexOf('@') + 1).trim().toLowerCase();

/**
 * Each project receiving at a recipient's domain, once, with the recipients that are its own and
 * whether it holds this SES message already.
 */
async function targetsFor(sql: Sql, recipients: string[], sesMessageId: string) {
  const projects = await projectsReceivingAt(sql, [...new Set(recipients.map(domainOf))], sesMessageId);
  return projects.map((p) => ({ projectId: p.projectId, holding: p.holding, receivedFor: recipients.filter((r) => p.domains.includes(domainOf(r))) }));
}

/**
 * The message as the notification's action left it: fetched from S3 as a stream, or decoded
 * from the SNS `content`. Past `INBOUND_MAX_MESSAGE_BYTES` nothing more is read, and the message
 * is stored from the notification's headers (`content_too_large`); so is one over a parse budget
 * or that the parser refuses (`parse_failed`, §22.1): trying it again would fail the same way.
 */
async function contentOf(config: Config, store: () => ObjectStore, n: ReceivedNotification, log: Logger) {
  try {
    return await fetchAndParse(config, store, n);
  } catch (err) {
    if (!isMimeRefusal(err)) throw err;
    log.warn({ sesMessageId: n.mail.messageId, err: err.message }, 'received message not parsed; stored from its notification');
    return parseFailed(n, 'refused');
  }
}

/** A message stored from its notification alone (§22.1, §22.4): its bytes stay in the bucket, unparsed. */
export function parseFailed(n: ReceivedNotification, reason: 'refused' | 'poison') {
  recordInboundParseFailed(reason);
  const action = n.receipt.action;
  return {
    parsed: parsedFromNotification(n),
    raw: null,
    rawSize: null,
    contentTooLarge: false,
    parseFailed: true,
    s3: action.type === 'S3' ? { bucket: action.bucketName, key: action.objectKey } : null,
  };
}

async function fetchAndParse(config: Config, store: () => ObjectStore, n: ReceivedNotification) {
  const max = config.inboundMaxMessageBytes;
  const tooLarge = (size: number | null) => ({ parsed: parsedFromNotification(n), raw: null, rawSize: size, contentTooLarge: true });
  const action = n.receipt.action;
  if (action.type === 'S3') {
    const object = await store().open(action.bucketName, action.objectKey);
    if (object.length !== undefined && object.length > max) {
      object.body.destroy();
      return { ...tooLarge(object.length), s3: { bucket: action.bucketName, key: action.objectKey } };
    }
    const parsed = await parseReceived(object.body, newAttachmentId, max);
    return { parsed, raw: null, rawSize: parsed.size, contentTooLarge: false, s3: { bucket: action.bucketName, key: action.objectKey } };
  }
  if (n.content === undefined) throw new Error('an SNS action notification without content');
  const raw = Buffer.from(n.content, action.encoding === 'BASE64' ? 'base64' : 'utf8');
  if (raw.length > max) return { ...tooLarge(raw.length), s3: null };
  const parsed: ParsedReceived = await parseReceived(Readable.from([raw]), newAttachmentId);
  return { parsed, raw, rawSize: raw.length, contentTooLarge: false, s3: null };
}

/** A message fetched and parsed, ready to be stored for its projects. */
export type PreparedReceived = { targets: Target[]; incoming: Incoming };

/**
 * Everything before the write (§20.2): the notification read, the projects receiving at a
 * recipient's domain (those already holding the message left out, so a redelivery fetches
 * nothing), and the message fetched and parsed. Answers an outcome instead when there is nothing
 * to store. Throws when the message could not be had, so the queue message stays and comes back.
 * With `parseFailed` the message is not fetched: it is stored from the notification (§22.4).
 */
export async function prepareReceived(deps: { config: Config; sql: Sql; log: Logger }, store: () => ObjectStore, record: unknown, opts: { parseFailed?: boolean } = {}): Promise<PreparedReceived | ReceivedOutcome> {
  const parsed = ReceivedNotification.safeParse(record);
  if (!parsed.success) {
    deps.log.warn({ issue: parsed.error.issues[0]?.message }, 'Received notification not understood; dropped');
    return 'invalid';
  }
  const n = parsed.data;
  const recipients = n.receipt.recipients.length ? n.receipt.recipients : n.mail.destination;
  const all = await targetsFor(deps.sql, recipients, n.mail.messageId);
  const targets = all.filter((t) => !t.holding);
  if (!targets.length) {
    if (all.length) return 'duplicate';
    deps.log.info({ sesMessageId: n.mail.messageId }, 'received message for no receiving domain of any project; dropped');
    return 'no_project';
  }
  // Poison (§22.4): a message that failed too often is stored from its notification, not fetched again.
  const content = opts.parseFailed ? parseFailed(n, 'poison') : await contentOf(deps.config, store, n, deps.log);
  return { targets: targets.map(({ projectId, receivedFor }) => ({ projectId, receivedFor })), incoming: { sesMessageId: n.mail.messageId, verdicts: verdictsOf(n.receipt), ...content } };
}

/** Prepares and stores one notification in a transaction of its own. */
export async function ingestReceived(deps: { config: Config; sql: Sql; log: Logger }, store: () => ObjectStore, record: unknown): Promise<ReceivedOutcome> {
  const prepared = await prepareReceived(deps, store, record);
  if (typeof prepared === 'string') return prepared;
  const stored = await storeReceived(deps.sql, prepared.targets, prepared.incoming);
  return stored.length ? 'stored' : 'duplicate';
}
