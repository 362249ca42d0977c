import type { Config } from '../platform/config.ts';
import type { Sql } from '../platform/db.ts';
import type { Arrival } from '../platform/group-commit.ts';
import { idClockNow, newId } from '../platform/ids.ts';
import { acceptQueued } from './accept.ts';
import { parseBatch } from './batch.ts';
import { acceptOnce, batchFingerprint, findReplay, fingerprint, type Accepted } from './idempotency.ts';
import { assertMessageSize } from './message-size.ts';
import * as q from './queries.ts';
import type { NewEmail, SubmittedMessage } from './queries.ts';
import { parseSendRequest, type ParsedSend, type SendEmail } from './validate.ts';
import { renderSend, type TemplateRenderer } from './template-send.ts';
import { ValidationError, type ValidationDetail } from '../http/errors.ts';
import { bareAddress } from '../suppressions/address.ts';
import { trackingDomainOf } from '../domains/queries.ts';
import { withDayPartitions } from '../retention/partitions.ts';
import { assertTopics } from '../broadcasts/topic-send.ts';

/**
 * Sending, as every API surface does it (`/v1` and the Resend-compatible `/resend`): validation,
 * the size limit, idempotency, and the write with its job. Callers only translate.
 */
export type SendDeps = { config: Config; sql: Sql; renderTemplate?: TemplateRenderer };

const statusOf = (send: ParsedSend, now = idClockNow()) =>
  send.scheduledAt && send.scheduledAt.getTime() > now ? 'scheduled' as const : 'queued' as const;

type TrackableSend = Pick<SendEmail, 'from'> & { trackOpens?: boolean | null; trackClicks?: boolean | null };

/**
 * A send (as rendered, so `from` is final) that switches tracking on needs a base for its links: the sender domain's
 * `tracking_domain`, or PUBLIC_BASE_URL. Without either it is refused (§15.1). The domain is read
 * only for such sends on an instance without PUBLIC_BASE_URL.
 */
async function assertTrackable(deps: SendDeps, projectId: string, sends: TrackableSend[], at: (i: number) => (string | number)[]) {
  if (deps.config.publicBaseUrl) return;
  const problems: ValidationDetail[] = [];
  for (const [i, send] of sends.entries()) {
    const on = (['trackOpens', 'trackClicks'] as const).filter((k) => send[k] === true);
    if (on.length === 0) continue;
    const domain = bareAddress(send.from).split('@').pop()!.toLowerCase();
    if (await trackingDomainOf(deps.sql, projectId, domain)) continue;
    for (const k of on) {
      problems.push({
        loc: [...at(i), k === 'trackOpens' ? 'track_opens' : 'track_clicks'],
        msg: `Tracking needs a base for its links: set the tracking_domain of ${domain} (PATCH /v1/domains/{id}) or PUBLIC_BASE_URL`,
        type: 'tracking_unavailable',
      });
    }
  }
  if (problems.length) throw new ValidationError(problems);
}

/** One email from a parsed JSON body. */
export async function sendEmail(deps: SendDeps, projectId: string, idempotencyKey: string | undefined, body: unknown) {
  const { config, sql } = deps;
  const send = parseSendRequest(body);
  await assertTopics(sql, projectId, [send], () => ['body']);
  let accepted: Accepted;
  if (idempotencyKey === undefined) {
    const id = newId('email');
    const ready = await renderSend(deps, projectId, send);
    await assertTrackable(deps, projectId, [ready], () => ['body']);
    await assertMessageSize(ready, id, projectId, config);
    accepted = { emailIds: [await acceptQueued(sql, { id, projectId, ...ready })], replayed: false };
  } else {
    // Hashing the whole message is only needed to recognise a repeat under the same key.
    const print = fingerprint(send);
    const replay = await findReplay(sql, projectId, idempotencyKey, print);
    const id = newId('email');
    if (replay) {
      accepted = replay;
    } else {
      const ready = await renderSend(deps, projectId, send);
      await assertTrackable(deps, projectId, [ready], () => ['body']);
      await assertMessageSize(ready, id, projectId, config);
      accepted = await withDayPartitions(sql, [id], () => acceptOnce(sql, projectId, idempotencyKey, print, async (tx) => {
        await q.insertQueuedEmails(tx, [{ id, projectId, ...ready }]);
        return [id];
      }));
    }
  }
  return { id: accepted.emailIds[0]!, status: statusOf(send), replayed: accepted.replayed };
}

/** A batch from a parsed JSON body, all or nothing, in one transaction. */
export async function sendBatch(deps: SendDeps, projectId: string, idempotencyKey: string | undefined, body: unknown) {
  const { sql } = deps;
  const { sends, emails } = await parseBatch(deps, body, projectId);
  await assertTopics(sql, projectId, sends, (i) => ['body', i]);
  await assertTrackable(deps, projectId, emails, (i) => ['body', i]);
  const print = batchFingerprint(sends);
  const accepted = (idempotencyKey === undefined ? undefined : await findReplay(sql, projectId, idempotencyKey, print))
    ?? await withDayPartitions(sql, emails.map((e) => e.id), () => acceptOnce(sql, projectId, idempotencyKey, print, async (tx) => {
      await q.insertQueuedEmails(tx, emails);
      return emails.map((e) => e.id);
    }));
  const now = idClockNow();
  return { data: accepted.emailIds.map((id, i) => ({ id, status: statusOf(sends[i]!, now) })), replayed: accepted.replayed };
}

/** A message submitted over SMTP, read and checked by the relay. */
export type Submission = Omit<NewEmail, 'id' | 'projectId' | 'scheduledAt' | 'submitted'> & { submitted: SubmittedMessage };

const isDuplicateMessageId = (err: unknown) =>
  (err as { code?: string; constraint_name?: string }).code === '23505'
  && (err as { constraint_name?: string }).constraint_name === 'submitted_message_ids_pkey';

/**
 * One email from a message submitted over SMTP, through the same group commit as `POST
 * /v1/emails`. A Message-ID the project submitted in the last 24 h answers the first email's id
 * and stores nothing: SMTP clients resend a message whose reply they lost. The primary key of
 * submitted_message_ids decides, so a new message costs no lookup and concurrent repeats yield one
 * email; an older holder of the Message-ID gives it up and the write is tried again.
 */
export async function sendSubmitted(deps: SendDeps, projectId: string, submission: Submission, arrival?: Arrival): Promise<{ id: string; replayed: boolean }> {
  const { sql } = deps;
  const messageId = submission.submitted.messageId;
  for (let attempt = 0; ; attempt++) {
    try {
      return { id: await acceptQueued(sql, { ...submission, id: newId('email'), projectId }, arrival), replayed: false };
    } catch (err) {
      if (messageId === undefined || !isDuplicateMessageId(err) || attempt >= 3) throw err;
    }
    const seen = await q.findSubmitted(sql, projectId, messageId);
    if (seen?.live) return { id: seen.id, replayed: true };
    if (seen) await q.releaseSubmittedMessageId(sql, projectId, messageId);
  }
}
