import type { Task } from 'graphile-worker';
import { z } from 'zod';
import type { WorkerDeps } from '../interfaces.ts';
import type { Sql } from '../platform/db.ts';
import { recordEvent } from '../events/record.ts';
import { composeMime } from './compose.ts';
import { sendJob } from './queries.ts';
import { getProviderConnection, type ProviderConnection } from '../providers/connections.ts';
import { sendWithSes } from '../providers/ses.ts';
import { sendToSink } from '../providers/sink-transport.ts';
import { classifySendError, ProviderFailure, type LastError } from '../providers/errors.ts';
import { bareAddress, normaliseAddress } from '../suppressions/address.ts';
import { suppressedAmong } from '../suppressions/queries.ts';
import { signUnsubscribeToken } from '../unsubscribe/token.ts';

/** Attempts (about an hour of backoff) before a retryable failure becomes `provider_unavailable`. */
export const MAX_SEND_ATTEMPTS = 8;
export const SINK_SMTP_RESPONSE = '250 Accepted by the Mailroom sink';

const Payload = z.object({ email_id: z.string().min(1).max(100), project_id: z.string().min(1).max(100) });

type Claimed = {
  id: string;
  projectId: string;
  attemptCount: number;
  fromAddress: string;
  toAddresses: string[];
  ccAddresses: string[];
  bccAddresses: string[];
  replyToAddresses: string[];
  subject: string;
  html: string | null;
  text: string | null;
  headers: Record<string, string>;
  attachments: { filename: string; content_type?: string; content: string }[];
  messageIdHeader: string | null;
};

/**
 * Moves a `queued` email (or one left in `sending` by a crashed attempt) to `sending`. A `sent`
 * or `failed` email is not returned, which is what makes a repeated job a no-op.
 */
async function claim(sql: Sql, projectId: string, emailId: string) {
  const [row] = await sql<[Claimed?]>`
    update emails set status = 'sending', attempt_count = attempt_count + 1, updated_at = now()
    where id = ${emailId} and project_id = ${projectId} and status in ('queued', 'sending')
    returning id, project_id, attempt_count, from_address, to_addresses, cc_addresses, bcc_addresses,
      reply_to_addresses, subject, html, text, headers, attachments, message_id_header`;
  return row;
}

/** Stable per email, so a retried attempt carries the same Message-ID as the first. */
function messageIdFor(email: Claimed): string {
  if (email.messageIdHeader) return email.messageIdHeader;
  const domain = bareAddress(email.fromAddress).split('@')[1] || 'mailroom';
  return `<${email.id}@${domain}>`;
}

type Delivery = { messageId: string; viaSink: boolean };

async function deliver(deps: WorkerDeps, email: Claimed, envelope: { to: string[]; cc: string[]; bcc: string[] }): Promise<Delivery> {
  const { config, sql } = deps;
  let conn: ProviderConnection | undefined;
  try {
    conn = await getProviderConnection(sql, config, email.projectId);
  } catch (err) {
    // AES-GCM refuses credentials sealed under another SECRET_KEY; only reconnecting fixes that.
    if ((err as Error).message.includes('unable to authenticate')) {
      throw new ProviderFailure('provider_auth_failed', 'The stored provider credentials cannot be decrypted (SECRET_KEY changed). Reconnect the project.');
    }
    throw err;
  }
  const raw = await composeMime({
    from: email.fromAddress,
    to: email.toAddresses,
    cc: email.ccAddresses,
    bcc: email.bccAddresses,
    replyTo: email.replyToAddresses,
    subject: email.subject,
    html: email.html,
    text: email.text,
    headers: email.headers,
    attachments: email.attachments.map((a) => ({
      filename: a.filename,
      contentType: a.content_type ?? 'application/octet-stream',
      content: a.content,
    })),
    messageId: messageIdFor(email),
    listUnsubscribeUrl: config.publicBaseUrl
      ? `${config.publicBaseUrl}/unsubscribe/${signUnsubscribeToken(config.secretKey, { projectId: email.projectId, emailId: email.id })}`
      : undefined,
  });
  const bare = (list: string[]) => list.map(bareAddress);
  if (conn) {
    const sent = await sendWithSes(config, conn, raw, { to: bare(envelope.to), cc: bare(envelope.cc), bcc: bare(envelope.bcc) });
    return { messageId: sent.messageId, viaSink: false };
  }
  const sent = await sendToSink(config, {
    projectId: email.projectId,
    emailId: email.id,
    from: bareAddress(email.fromAddress),
    recipients: bare([...envelope.to, ...envelope.cc, ...envelope.bcc]),
    raw,
  });
  return { messageId: sent.messageId, viaSink: true };
}

/** `sent` (plus `delivered` for the sink, which is the receiving server) with its events, atomically. */
async function markSent(sql: Sql, email: Claimed, delivery: Delivery, visible: string[]) {
  await sql.begin(async (tx) => {
    const [row] = await tx`
      update emails set status = 'sent', sent_at = now(), provider_message_id = ${delivery.messageId},
        delivered_at = ${delivery.viaSink ? tx`now()` : tx`delivered_at`}, last_error = null, updated_at = now()
      where id = ${email.id} and project_id = ${email.projectId} and status = 'sending'
      returning id`;
    if (!row) return;
    const base = { projectId: email.projectId, emailId: email.id };
    await recordEvent(tx, { ...base, type: 'email.sent', data: { to: visible, provider_message_id: delivery.messageId } });
    if (delivery.viaSink) {
      await recordEvent(tx, { ...base, type: 'email.delivered', data: { to: visible, smtp_response: SINK_SMTP_RESPONSE } });
    }
  });
}

async function markFailed(sql: Sql, email: Claimed, lastError: LastError, message: string) {
  await sql.begin(async (tx) => {
    const [row] = await tx`
      update emails set status = 'failed', last_error = ${lastError}, updated_at = now()
      where id = ${email.id} and project_id = ${email.projectId} and status = 'sending'
      returning id`;
    if (row) {
      await recordEvent(tx, { projectId: email.projectId, emailId: email.id, type: 'email.failed', data: { reason: lastError, message } });
    }
  });
}

/**
 * Back to `queued`, and a new job for the same key at now + base × 2^(attempt-1). The running
 * job is locked, so add_job gives the key to the new job and this one simply completes; the
 * backoff is ours, not graphile-worker's, so its schedule is the contract's hour.
 */
async function requeue(sql: Sql, email: Claimed, delayMs: number) {
  await sql.begin(async (tx) => {
    await tx`
      update emails set status = 'queued', updated_at = now()
      where id = ${email.id} and project_id = ${email.projectId} and status = 'sending'`;
    await tx`select ${sendJob(tx, email.id, email.projectId, delayMs)}`;
  });
}

export function emailSendTask(deps: WorkerDeps): Task {
  return async (payload) => {
    const { email_id: emailId, project_id: projectId } = Payload.parse(payload);
    const { sql, config } = deps;
    const email = await claim(sql, projectId, emailId);
    if (!email) return;
    const log = deps.log.child({ emailId, projectId, attempt: email.attemptCount });

    const suppressed = await suppressedAmong(sql, projectId, [...email.toAddresses, ...email.ccAddresses, ...email.bccAddresses]);
    const keep = (list: string[]) => list.filter((a) => !suppressed.has(normaliseAddress(a)));
    const envelope = { to: keep(email.toAddresses), cc: keep(email.ccAddresses), bcc: keep(email.bccAddresses) };
    if (envelope.to.length + envelope.cc.length + envelope.bcc.length === 0) {
      await markFailed(sql, email, 'recipient_suppressed', 'Every recipient is on the project\'s suppression list.');
      log.info('email failed: every recipient suppressed');
      return;
    }

    let delivery: Delivery;
    try {
      delivery = await deliver(deps, email, envelope);
    } catch (err) {
      const outcome = classifySendError(err);
      if (!outcome.retry) {
        await markFailed(sql, email, outcome.lastError, outcome.message);
        log.warn({ lastError: outcome.lastError, reason: outcome.message }, 'email failed');
      } else if (email.attemptCount >= MAX_SEND_ATTEMPTS) {
        await markFailed(sql, email, 'provider_unavailable', `Gave up after ${email.attemptCount} attempts. Last: ${outcome.message}`);
        log.warn({ reason: outcome.message }, 'email failed: retries exhausted');
      } else {
        const delayMs = config.emailRetryBaseMs * 2 ** (email.attemptCount - 1);
        await requeue(sql, email, delayMs);
        log.info({ reason: outcome.message, retryInMs: delayMs }, 'email send deferred');
      }
      return;
    }
    await markSent(sql, email, delivery, [...envelope.to, ...envelope.cc]);
    log.debug({ providerMessageId: delivery.messageId, suppressed: suppressed.size }, 'email sent');
  };
}
