import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Task } from 'graphile-worker';
import { z } from 'zod';
import type { HtmlForSending, WorkerDeps } from '../interfaces.ts';
import type { Sql } from '../platform/db.ts';
import type { Logger } from '../platform/log.ts';
import type { EmailEvent } from '../events/record.ts';
import { composeMime } from './compose.ts';
import * as q from './queries.ts';
import type { ClaimedEmail } from './queries.ts';
import { classifySendError, SlotMissed, type LastError } from '../providers/errors.ts';
import { giveBackSlot, reserveSendSlot, slowDown, throttledSince, type TakenSlot } from '../providers/pacing.ts';
import { quotaRereadDone, rereadQuotaAfterThrottle } from '../providers/quota.ts';
import { getProviderConnection } from '../providers/connections.ts';
import { settlePending, settleSentWhenBack } from './settle-later.ts';
import { LEASE_SECONDS } from './leases.ts';
import { submittedBodies } from './submitted-bodies.ts';
import { transportFor, type Envelope, type SendOptions, type Transport } from '../providers/transport.ts';
import { bareAddress, normaliseAddress } from '../suppressions/address.ts';
import { suppressedAmong } from '../suppressions/queries.ts';
import { listUnsubscribeUrl } from './list-unsubscribe.ts';
import { prepareSubmitted } from './submitted.ts';
import { observeSend, recordEmailOutcome } from '../platform/metrics.ts';
import { EXPIRED_UNSENT } from '../retention/queries.ts';
import { applyTopic } from '../broadcasts/topic-send.ts';

/** Attempts (about an hour of backoff) before a retryable failure becomes `provider_unavailable`. */
export const MAX_SEND_ATTEMPTS = 8;
export const SINK_SMTP_RESPONSE = '250 Accepted by the Mailroom sink';
/**
 * A request to SES must leave within this of its slot, else it takes another. The pacing's
 * headroom absorbs about 170 ms between slot and SES; the rest is left to the connection.
 */
const LATE_FOR_SLOT_MS = 50;
const MAX_SLOT_TRIES = 3;
/** An email whose every slot passed before its request could leave is re-run this soon. */
const SLOTS_MISSED_RETRY_MS = 1000;
/** A throttled send is tried again this soon, at the connection's halved pace. */
const THROTTLE_RETRY_MS = 1000;
/** SES says the 24-hour quota is spent: look again in ten minutes. */
const QUOTA_RETRY_MS = 10 * 60_000;

const Payload = z.object({ email_id: z.string().min(1).max(100), project_id: z.string().min(1).max(100) });

/** Who a List-Unsubscribe link may speak for: the email's recipients, to, cc and bcc. */
function unsubscribeTarget(email: ClaimedEmail) {
  return { projectId: email.projectId, emailId: email.id, to: email.toAddresses, cc: email.ccAddresses, bcc: email.bccAddresses };
}

/** Stable per email, so a retried attempt (even one whose outcome was unknown) carries the same Message-ID. */
function messageIdFor(email: ClaimedEmail): string {
  if (email.messageIdHeader) return email.messageIdHeader;
  const domain = bareAddress(email.fromAddress).split('@')[1] || 'mailroom';
  return `<${email.id}@${domain}>`;
}

function compose(deps: WorkerDeps, email: ClaimedEmail, html = email.html) {
  const { config } = deps;
  return composeMime({
    from: email.fromAddress,
    to: email.toAddresses,
    cc: email.ccAddresses,
    bcc: email.bccAddresses,
    replyTo: email.replyToAddresses,
    subject: email.subject,
    html,
    text: email.text,
    headers: email.headers,
    attachments: email.attachments.map((a) => ({
      filename: a.filename,
      contentType: a.content_type ?? 'application/octet-stream',
      content: a.content,
      contentId: a.content_id,
    })),
    messageId: messageIdFor(email),
    listUnsubscribeUrl: listUnsubscribeUrl(config, unsubscribeTarget(email)),
  });
}

/**
 * The bytes the provider gets: mail submitted over SMTP goes as it was submitted, with only the
 * header edits §13.2 allows (so it is never tracked); API mail is composed from its columns, with
 * the HTML tracking makes when it is switched on.
 */
function messageFor(deps: WorkerDeps, email: ClaimedEmail, log: Logger, outgoingHtml?: HtmlForSending): Promise<Buffer> | Buffer {
  if (!email.rawMessage) return composeOutgoing(deps, email, log, outgoingHtml);
  return prepareSubmitted(email.rawMessage, {
    messageId: messageIdFor(email),
    listUnsubscribeUrl: listUnsubscribeUrl(deps.config, unsubscribeTarget(email)),
  });
}

/**
 * A relayed email's text and html, read once from its message in the MIME pool (§22.1) while it
 * is sent, to be stored as it settles: the relay's acceptance reads only the header section, and
 * no read of the email parses the message. Started once per attempt; a read that fails stores
 * nothing, and the email is still settled.
 */
const bodiesReading = new WeakMap<ClaimedEmail, Promise<void>>();
function readBodies(email: ClaimedEmail, log: Logger): Promise<void> {
  const raw = email.rawMessage;
  if (!raw || email.html !== null || email.text !== null) return Promise.resolve();
  let reading = bodiesReading.get(email);
  if (!reading) {
    reading = submittedBodies(raw, log).then(
      (bodies) => { email.bodiesRead = bodies; },
      (err: unknown) => { log.warn({ err: (err as Error).message }, 'relayed message\'s bodies not read; it is shown without them'); },
    );
    bodiesReading.set(email, reading);
  }
  return reading;
}

/**
 * Records `sent`. The provider has accepted the message, so it is never released to be sent
 * again: if the database refuses the record now (a restart, a failover), the message id is kept
 * in memory and the record made when the database is back.
 */
async function settleSent(deps: WorkerDeps, email: ClaimedEmail, messageId: string, viaSink: boolean, visible: string[], recipients: number) {
  await readBodies(email, deps.log);
  // SES counts each recipient it was handed (bcc included) toward the account's rates; the sink's never reach SES.
  const events: EmailEvent[] = [{ type: 'email.sent', data: { to: visible, provider_message_id: messageId }, ...(viaSink ? {} : { reputation: { metric: 'sent', n: recipients } }) }];
  if (viaSink) events.push({ type: 'email.delivered', data: { to: visible, smtp_response: SINK_SMTP_RESPONSE } });
  try {
    await q.markSent(deps.sql, email, messageId, viaSink, events);
  } catch (err) {
    deps.log.warn({ emailId: email.id, providerMessageId: messageId, err: (err as Error).message }, 'accepted send not recorded yet; recording it when the database answers');
    settleSentWhenBack(deps, email, messageId, viaSink, events);
  }
}

async function settleFailed(sql: Sql, log: Logger, email: ClaimedEmail, lastError: LastError, message: string) {
  await readBodies(email, log);
  await q.markFailed(sql, email, lastError, [{ type: 'email.failed', data: { reason: lastError, message } }]);
}

/**
 * Waits for this email's next send slot on a paced connection, and answers when the request must
 * have left by (`performance.now()` time). Undefined when the email went back to the queue
 * instead (slot too far ahead), which costs no attempt.
 *
 * The wait is counted from PostgreSQL's clock, read somewhere between asking and the answer: the
 * sleep starts at the answer, so the request never leaves before its slot, and the deadline is
 * counted from the asking, so a slow answer cannot push it later than the slot.
 */
async function awaitSlot(sql: Sql, email: ClaimedEmail, recipients: number): Promise<{ leaveBy: number; slot: TakenSlot } | undefined> {
  const asked = performance.now();
  const decision = await reserveSendSlot(sql, email.projectId, recipients);
  if ('quotaWaitMs' in decision) {
    await q.requeue(sql, email, decision.quotaWaitMs, false);
    return undefined;
  }
  if ('retryInMs' in decision) {
    await q.requeue(sql, email, decision.retryInMs, false);
    return undefined;
  }
  if (decision.waitMs > 0) await sleep(decision.waitMs);
  return { leaveBy: asked + decision.waitMs + LATE_FOR_SLOT_MS, slot: decision.slot };
}

/**
 * Sends on the transport, in a slot of the connection's pace when it has one. A request that could
 * not leave in time (a busy event loop, or the SDK's first request in this process) could land in
 * the second of the next slot's: it goes unsent and takes the next free slot, up to
 * MAX_SLOT_TRIES; after that the email goes back to the queue. Undefined when it was requeued.
 */
async function sendInTurn(sql: Sql, log: Logger, email: ClaimedEmail, transport: Transport, raw: Buffer, envelope: Envelope, paced: { accountId?: string; taken?: TakenSlot }) {
  const send = async (options: SendOptions = {}) => {
    const started = performance.now();
    let left = true;
    try {
      return await transport.send(raw, envelope, options);
    } catch (err) {
      left = !(err instanceof SlotMissed);
      throw err;
    } finally {
      if (left) observeSend(transport.provider, (performance.now() - started) / 1000);
    }
  };
  if (!transport.paced) return send();
  // SES counts every recipient against the rate and the day.
  const recipients = envelope.to.length + envelope.cc.length + envelope.bcc.length;
  for (let tries = 1; tries <= MAX_SLOT_TRIES; tries++) {
    // A throttle on this account is followed by a fresh read of its quota: no slot is taken at the old rate meanwhile.
    await quotaRereadDone(paced.accountId);
    const turn = await awaitSlot(sql, email, recipients);
    if (turn === undefined) return undefined;
    paced.accountId = turn.slot.accountId;
    // Throttled while this send waited: its slot was spaced for a rate SES no longer allows.
    if (throttledSince(turn.slot)) {
      await giveBackSlot(sql, turn.slot);
      continue;
    }
    paced.taken = turn.slot;
    try {
      return await send({ leaveBy: turn.leaveBy });
    } catch (err) {
      if (!(err instanceof SlotMissed)) throw err;
      paced.taken = undefined;
      await giveBackSlot(sql, turn.slot);
    }
  }
  // A worker too busy to make any of its slots hands the email back rather than send it late.
  await q.requeue(sql, email, SLOTS_MISSED_RETRY_MS, false);
  log.info({ slots: MAX_SLOT_TRIES, retryInMs: SLOTS_MISSED_RETRY_MS }, 'email send missed every slot it took; back in the queue');
  return undefined;
}

/**
 * The message as it leaves: with the HTML tracking made (links through Mailroom, the pixel) when
 * `outgoingHtml` gives one, else as stored. Tracking never fails a send: an error of its own, or
 * a tracked message over the size limit, sends the stored HTML instead, with the reason logged.
 */
async function composeOutgoing(deps: WorkerDeps, email: ClaimedEmail, log: Logger, outgoingHtml?: HtmlForSending) {
  let html: string | undefined;
  if (outgoingHtml && email.html) {
    html = await outgoingHtml({ ...email, html: email.html }, log).catch((err: unknown) => {
      log.warn({ err, reason: 'tracking_failed' }, 'email sent untracked: tracking could not rewrite it');
      return undefined;
    });
  }
  if (html === undefined) return compose(deps, email);
  const raw = await compose(deps, email, html);
  if (raw.length <= deps.config.emailMaxMessageBytes) return raw;
  log.warn({ reason: 'tracked_message_too_large', sizeBytes: raw.length }, 'email sent untracked: the tracked message is over EMAIL_MAX_MESSAGE_BYTES');
  return compose(deps, email);
}

export function emailSendTask(deps: WorkerDeps, outgoingHtml?: HtmlForSending): Task {
  return async (payload, helpers) => {
    const { email_id: emailId, project_id: projectId } = Payload.parse(payload);
    const { sql, config, leases } = deps;
    // Leases name this process's holder, which beats as long as the process lives, whatever
    // happens to the job runner; without one (a task run on its own) they name the job's pool.
    const owner = `${leases?.id ?? helpers?.job?.locked_by ?? 'worker'}/${randomUUID().slice(0, 12)}`;
    const self = leases ? { id: leases.id, busy: leases.busy.has(emailId) } : undefined;
    // Marked busy before the claim, not after: two jobs of this process for one email (a replaced
    // runner's job still running beside its successor's) could otherwise both take over the
    // process's own lease and both send.
    const reserved = leases !== undefined && !self!.busy;
    if (reserved) leases.busy.set(emailId, projectId);
    const email = await q.claimEmail(sql, projectId, emailId, { owner, seconds: LEASE_SECONDS, deadAfterSeconds: config.workerDeadAfterSeconds, self })
      .catch((err: unknown) => { if (reserved) leases.busy.delete(emailId); throw err; });
    if (!email) {
      if (reserved) leases.busy.delete(emailId);
      // Held by a paused project: the resume gives it a job again (§19.4). Resumed since the claim
      // looked: this job tries again, since the resume may not have seen the email.
      const hold = await q.holdIfPaused(sql, projectId, emailId);
      if (hold === 'held') return;
      if (hold === 'claimable') return void await q.enqueueSendAgain(sql, projectId, emailId, 0);
      // Another attempt holds it: look again when its lease ends, in case that attempt dies.
      const leaseEnd = await q.liveLeaseEnd(sql, projectId, emailId);
      if (leaseEnd) await q.enqueueSendAgain(sql, projectId, emailId, leaseEnd.getTime() - Date.now() + 1000);
      return;
    }
    leases?.busy.set(emailId, projectId);
    try {
      await sendClaimed(deps, email, outgoingHtml);
    } catch (err) {
      // The attempt ended on an error of its own (its database connection went, say) before the
      // provider accepted anything, and sends nothing more. Its lease is given up, so the job's
      // retry need not wait the lease out. Delivery stays at least once.
      await q.giveUpLease(sql, email).catch(() => giveUpLeaseWhenBack(deps, email));
      throw err;
    } finally {
      if (!settlePending(emailId) && !givingUp.has(emailId)) leases?.busy.delete(emailId);
    }
  };
}

/** Emails whose give-up waits for the database. */
const givingUp = new Set<string>();

/** Retries grow to the last and stay there until the database answers. */
const GIVE_UP_RETRY_MS = [1000, 2000, 4000, 5000];

/**
 * A give-up the database refused, as it does while it is away, is tried again in the background
 * until it answers; then the email's job runs again at once. Without this the email would wait
 * out its lease, since a retry that finds the lease live waits for its end.
 */
function giveUpLeaseWhenBack({ sql, log, leases }: WorkerDeps, email: ClaimedEmail) {
  leases?.busy.set(email.id, email.projectId);
  givingUp.add(email.id);
  void (async () => {
    for (let i = 0; ; i++) {
      await sleep(GIVE_UP_RETRY_MS[Math.min(i, GIVE_UP_RETRY_MS.length - 1)]!, undefined, { ref: false });
      try {
        if (await q.giveUpLeaseLate(sql, email)) {
          log.info({ emailId: email.id, projectId: email.projectId }, 'lease given up once the database answered; the email is tried again now');
        }
        return;
      } catch {
        // Still away: try again later.
      }
    }
  })().finally(() => {
    givingUp.delete(email.id);
    leases?.busy.delete(email.id);
  });
}

/** The send of an email this attempt has claimed, to its settling as sent, failed or requeued. */
async function sendClaimed(deps: WorkerDeps, email: ClaimedEmail, outgoingHtml?: HtmlForSending) {
  const { sql, config } = deps;
  const { id: emailId, projectId } = email;
  const log = deps.log.child({ emailId, projectId, attempt: email.attemptCount });

  // An email whose body retention purged (an older release purged unsent mail) would go out blank.
  if (email.bodyPurged) {
    await settleFailed(sql, log, email, EXPIRED_UNSENT, 'Its body was removed by retention (BODY_RETENTION_DAYS) before it could be sent.');
    log.warn('email failed: its body was purged before it could be sent');
    return;
  }

  const suppressed = email.hasSuppressions
    ? await suppressedAmong(sql, projectId, [...email.toAddresses, ...email.ccAddresses, ...email.bccAddresses])
    : new Set<string>();
  const keep = (list: string[]) => (suppressed.size ? list.filter((a) => !suppressed.has(normaliseAddress(a))) : list);
  let envelope = { to: keep(email.toAddresses), cc: keep(email.ccAddresses), bcc: keep(email.bccAddresses) };
  if (envelope.to.length + envelope.cc.length + envelope.bcc.length === 0) {
    await settleFailed(sql, log, email, 'recipient_suppressed', 'Every recipient is on the project\'s suppression list.');
    log.info('email failed: every recipient suppressed');
    return;
  }
  // Sent under a topic: contacts opted out of it are skipped, and one contact gets the topic's own one-click link.
  if (email.topicId) {
    const topic = await applyTopic(config, sql, projectId, email.topicId, envelope);
    envelope = topic.envelope;
    if (topic.headers) email.headers = { ...topic.headers, ...email.headers };
    if (envelope.to.length + envelope.cc.length + envelope.bcc.length === 0) {
      await settleFailed(sql, log, email, 'recipient_suppressed', 'Every recipient has opted out of the email\'s topic.');
      log.info('email failed: every recipient opted out of its topic');
      return;
    }
  }

  let sent: { messageId: string; viaSink: boolean };
  let transport: Transport | undefined;
  const paced: { accountId?: string; taken?: TakenSlot } = {};
  try {
    transport = await transportFor(deps, projectId, emailId, email.hasProvider);
    // Composed before waiting for the slot, so the request leaves as close to it as possible.
    const raw = await messageFor(deps, email, log, outgoingHtml);
    void readBodies(email, log);
    const bare = (list: string[]) => list.map(bareAddress);
    const result = await sendInTurn(sql, log, email, transport, raw, { from: bareAddress(email.fromAddress), to: bare(envelope.to), cc: bare(envelope.cc), bcc: bare(envelope.bcc), tags: email.tags }, paced);
    if (!result) return;
    sent = { messageId: result.messageId, viaSink: transport.provider === 'sink' };
  } catch (err) {
    const outcome = classifySendError(err);
    const provider = transport?.provider ?? 'ses';
    const exhausted = outcome.retry && !outcome.pace && email.attemptCount >= MAX_SEND_ATTEMPTS;
    recordEmailOutcome(provider, !outcome.retry || exhausted ? 'failed' : outcome.pace === 'throttled' ? 'throttled' : 'retried');
    // SES refused the message outright: its recipients did not count against the day.
    if (paced.taken && (!outcome.retry || outcome.pace === 'daily_quota')) await giveBackSlot(sql, paced.taken);
    if (!outcome.retry) {
      await settleFailed(sql, log, email, outcome.lastError, outcome.message);
      log.warn({ lastError: outcome.lastError, reason: outcome.message }, 'email failed');
    } else if (outcome.pace === 'throttled') {
      await slowDown(sql, projectId, paced.taken);
      // SES's MaxSendRate may have dropped since it was read: read it again now, and follow it.
      const conn = await getProviderConnection(sql, config, projectId);
      if (conn) await rereadQuotaAfterThrottle(deps, conn);
      await q.requeue(sql, email, THROTTLE_RETRY_MS, false);
      log.info({ reason: outcome.message }, 'email send throttled; pace halved for a minute and the quota read again');
    } else if (outcome.pace === 'daily_quota') {
      await q.requeue(sql, email, QUOTA_RETRY_MS, false);
      log.warn({ reason: outcome.message }, 'email send waits for the daily quota');
    } else if (exhausted) {
      await settleFailed(sql, log, email, 'provider_unavailable', `Gave up after ${email.attemptCount} attempts. Last: ${outcome.message}`);
      log.warn({ reason: outcome.message }, 'email failed: retries exhausted');
    } else {
      const delayMs = config.emailRetryBaseMs * 2 ** (email.attemptCount - 1);
      await q.requeue(sql, email, delayMs, true);
      log.info({ reason: outcome.message, retryInMs: delayMs }, 'email send deferred');
    }
    return;
  }
  await settleSent(deps, email, sent.messageId, sent.viaSink, [...envelope.to, ...envelope.cc], envelope.to.length + envelope.cc.length + envelope.bcc.length);
  recordEmailOutcome(sent.viaSink ? 'sink' : 'ses', 'sent');
  log.debug({ providerMessageId: sent.messageId, suppressed: suppressed.size }, 'email sent');
}
