import type { TxSql } from '../platform/db.ts';
import type { Logger } from '../platform/log.ts';
import { addSuppressions } from '../suppressions/queries.ts';
import { normaliseSesEvent } from './normalise.ts';
import { recordEvent, type ReputationCount } from './record.ts';
import { evaluateReputation } from '../reputation/evaluate.ts';
import { idFloor } from '../platform/ids.ts';
import { recordEventIngested, recordTrackingEvent } from '../platform/metrics.ts';

/** SES's rates count hard (Permanent) bounces and complaints, per recipient; nothing else. */
function reputationCount(type: string, data: Record<string, unknown>): ReputationCount | undefined {
  const recipients = Math.max(1, Array.isArray(data.to) ? data.to.length : 1);
  if (type === 'email.bounced' && data.bounce_type === 'permanent') return { metric: 'bounced', n: recipients };
  if (type === 'email.complained') return { metric: 'complained', n: recipients };
  return undefined;
}

export type IngestOutcome = 'recorded' | 'duplicate' | 'ignored' | 'unknown_email' | 'invalid';

/**
 * Notifications dropped since the process started, by cause. An unknown message id is
 * expected now and then (mail sent before the project was connected, or by another system
 * sharing the configuration set), but a steady climb means the wrong queue or topic is wired.
 */
export const ingestCounters = { unknownEmail: 0, ignored: 0, invalid: 0 };

/**
 * How far before SES took a message its email was most likely made: queued mail leaves within
 * seconds, mail scheduled or retried a while later; a lookup in that range reads a few day
 * partitions, and only an email made earlier costs the lookup over every partition.
 */
const LIKELY_MADE_WITHIN_MS = 3 * 86_400_000;
/** SES's clock and the database's may differ a little. */
const CLOCK_SLACK_MS = 10 * 60_000;

async function findEmail(tx: TxSql, projectId: string, providerMessageId: string, sentAt: Date | undefined) {
  type Found = [{ id: string; visible: string[] }?];
  // The bounds are parameters of a plan made for their values, so PostgreSQL plans and reads
  // only the partitions in the range, however many days of history there are.
  if (sentAt) {
    const [row] = await tx<Found>`
      select id, to_addresses || cc_addresses as visible from emails
      where project_id = ${projectId} and provider_message_id = ${providerMessageId}
        and id >= ${idFloor('email', sentAt.getTime() - LIKELY_MADE_WITHIN_MS)}
        and id < ${idFloor('email', sentAt.getTime() + CLOCK_SLACK_MS)}`;
    if (row) return row;
  }
  const [row] = await tx<Found>`
    select id, to_addresses || cc_addresses as visible from emails where project_id = ${projectId} and provider_message_id = ${providerMessageId}`;
  return row;
}

async function markDelivered(tx: TxSql, projectId: string, emailId: string, at: Date) {
  // The first recipient's delivery is the moment the message was delivered; later ones don't move it.
  await tx`
    update emails set delivered_at = least(delivered_at, ${at}), updated_at = now()
    where id = ${emailId} and project_id = ${projectId}`;
}

/** The first open or click is the email's `opened_at` or `clicked_at`; later ones don't move it. */
async function markEngaged(tx: TxSql, projectId: string, emailId: string, type: 'email.opened' | 'email.clicked', at: Date) {
  await (type === 'email.opened'
    ? tx`update emails set opened_at = least(opened_at, ${at}) where id = ${emailId} and project_id = ${projectId}`
    : tx`update emails set clicked_at = least(clicked_at, ${at}) where id = ${emailId} and project_id = ${projectId}`);
}

/**
 * Applies one SES record for the project inside the caller's transaction: the event (with its
 * webhook deliveries), `delivered_at`, and suppression of hard-bounced or complaining
 * recipients all commit together or not at all.
 */
export async function ingestSesRecord(tx: TxSql, log: Logger, projectId: string, raw: unknown): Promise<IngestOutcome> {
  const normalised = normaliseSesEvent(raw);
  if (normalised.kind === 'invalid') {
    ingestCounters.invalid++;
    log.warn({ projectId, dropped: ingestCounters.invalid }, 'event notification is not an SES event record; dropped');
    return 'invalid';
  }
  if (normalised.kind === 'ignored') {
    ingestCounters.ignored++;
    log.debug({ projectId, sesType: normalised.reason }, 'SES notification type not reported as an event');
    return 'ignored';
  }

  const email = await findEmail(tx, projectId, normalised.providerMessageId, normalised.sentAt);
  const emailId = email?.id;
  if (!email || !emailId) {
    ingestCounters.unknownEmail++;
    log.info(
      { projectId, providerMessageId: normalised.providerMessageId, type: normalised.type, dropped: ingestCounters.unknownEmail },
      'event for an unknown provider message id; dropped',
    );
    return 'unknown_email';
  }

  // SES names every recipient of an open or click, bcc included; like Mailroom's own tracking,
  // the event names the visible ones.
  const engagement = normalised.type === 'email.opened' || normalised.type === 'email.clicked' ? normalised.type : undefined;
  const reputation = reputationCount(normalised.type, normalised.data);
  const eventId = await recordEvent(tx, {
    projectId,
    emailId,
    type: normalised.type,
    data: engagement ? { ...normalised.data, to: email.visible } : normalised.data,
    dedupeKey: normalised.dedupeKey,
    reputation,
  });
  if (!eventId) return 'duplicate';
  if (normalised.deliveredAt) await markDelivered(tx, projectId, emailId, normalised.deliveredAt);
  if (normalised.suppress && normalised.suppress.addresses.length) {
    await addSuppressions(tx, projectId, normalised.suppress.addresses, normalised.suppress.reason, emailId);
  }
  if (engagement && normalised.engagedAt) {
    await markEngaged(tx, projectId, emailId, engagement, normalised.engagedAt);
    recordTrackingEvent(engagement);
  }
  recordEventIngested(normalised.type);
  log.debug({ projectId, emailId, eventId, type: normalised.type }, 'event recorded');
  // A hard bounce or complaint may cross a pause threshold: checked last in this transaction, so
  // the pause commits with the event that caused it, and the next claim of a send sees it.
  if (reputation) await evaluateReputation(tx, log, projectId);
  return 'recorded';
}
