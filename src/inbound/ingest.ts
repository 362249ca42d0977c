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

export type ReceivedOutcome = 'stored' | 'duplicate' | 'no_project' | 'refused' | 'invalid';

export const newAttachmentId = () => newId('receivedAttachment');

const domainOf = (address: string) => address.slice(address.lastIndexOf('@') + 1).trim().toLowerCase();

/**
 * Where a notification came from: the SES accounts (access key id and region) of the connection
 * whose queue or topic delivered it, and how to read their bucket. It speaks for those accounts'
 * projects only (§22.2).
 */
export type ReceivedSource = { sesAccountIds: string[]; store: () => ObjectStore };

/**
 * Each project of the source's accounts receiving at a recipient's domain, once, with the
 * recipients that are its own and whether it holds this SES message already. A domain counts only
 * when the notification's S3 object is in the bucket and under the prefix its set-up named; the
 * domains that do not are answered apart, as refused.
 */
async function targetsFor(sql: Sql, source: ReceivedSource, n: ReceivedNotification, recipients: string[]) {
  const rows = await projectsReceivingAt(sql, source.sesAccountIds, [...new Set(recipients.map(domainOf))], n.mail.messageId);
  const action = n.receipt.action;
  const named = (r: (typeof rows)[number]) => action.type !== 'S3' || (r.bucket === action.bucketName && action.objectKey.startsWith(r.prefix));
  const projects = new Map<string, { holding: boolean; domains: string[] }>();
  for (const r of rows.filter(named)) {
    const p = projects.get(r.projectId) ?? { holding: r.holding, domains: [] };
    p.domains.push(r.domain);
    projects.set(r.projectId, p);
  }
  const targets = [...projects].map(([projectId, p]) => ({ projectId, holding: p.holding, receivedFor: recipients.filter((x) => p.domains.includes(domainOf(x))) }));
  return { targets, refused: [...new Set(rows.filter((r) => !named(r)).map((r) => r.domain))] };
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
 * Everything before the write (§20.2): the notification read, the projects of the source's
 * accounts receiving at a recipient's domain with the bucket it names (those already holding the
 * message left out, so a redelivery fetches nothing), and the message fetched and parsed. Answers
 * an outcome instead when there is nothing to store; a notification no project of the source
 * set up is dropped with one warning. Throws when the message could not be had, so the queue
 * message stays and comes back. With `parseFailed` the message is not fetched: it is stored from
 * the notification (§22.4).
 */
export async function prepareReceived(deps: { config: Config; sql: Sql; log: Logger }, source: ReceivedSource, record: unknown, opts: { parseFailed?: boolean } = {}): Promise<PreparedReceived | ReceivedOutcome> {
  const parsed = ReceivedNotification.safeParse(record);
  if (!parsed.success) {
    deps.log.warn({ issue: parsed.error.issues[0]?.message }, 'Received notification not understood; dropped');
    return 'invalid';
  }
  const n = parsed.data;
  const recipients = n.receipt.recipients.length ? n.receipt.recipients : n.mail.destination;
  const { targets: all, refused } = await targetsFor(deps.sql, source, n, recipients);
  const action = n.receipt.action;
  const where = action.type === 'S3' ? { bucket: action.bucketName, key: action.objectKey } : { action: 'SNS' };
  if (!all.length) {
    deps.log.warn(
      { sesMessageId: n.mail.messageId, domains: [...new Set(recipients.map(domainOf))].slice(0, 10), refused, ...where },
      refused.length
        ? 'Received notification names an S3 object outside the bucket and prefix its domain\'s receiving set-up named; dropped'
        : 'Received notification for no receiving domain of a project on this SES account; dropped',
    );
    return refused.length ? 'refused' : 'no_project';
  }
  if (refused.length) {
    deps.log.warn({ sesMessageId: n.mail.messageId, refused, ...where }, 'Received notification names an S3 object outside the bucket and prefix of some of its domains; not stored for them');
  }
  const targets = all.filter((t) => !t.holding);
  if (!targets.length) return 'duplicate';
  // Poison (§22.4): a message that failed too often is stored from its notification, not fetched again.
  const content = opts.parseFailed ? parseFailed(n, 'poison') : await contentOf(deps.config, source.store, n, deps.log);
  return { targets: targets.map(({ projectId, receivedFor }) => ({ projectId, receivedFor })), incoming: { sesMessageId: n.mail.messageId, verdicts: verdictsOf(n.receipt), ...content } };
}

/** Prepares and stores one notification in a transaction of its own. */
export async function ingestReceived(deps: { config: Config; sql: Sql; log: Logger }, source: ReceivedSource, record: unknown): Promise<ReceivedOutcome> {
  const prepared = await prepareReceived(deps, source, record);
  if (typeof prepared === 'string') return prepared;
  const stored = await storeReceived(deps.sql, prepared.targets, prepared.incoming);
  return stored.length ? 'stored' : 'duplicate';
}
