import type { SMTPServerDataStream, SMTPServerSession } from 'smtp-server';
import { announceQueued } from '../emails/accept.ts';
import { sendSubmitted } from '../emails/service.ts';
import type { RateLimiter } from '../http/rate-limit.ts';
import type { Config } from '../platform/config.ts';
import type { Sql } from '../platform/db.ts';
import type { Arrival } from '../platform/group-commit.ts';
import type { Logger } from '../platform/log.ts';
import { checkMessageBytes, headerSectionBounds } from './checks.ts';
import { SmtpReply } from './reply.ts';
import { readSubmission } from './submission.ts';

export type RelayDeps = { config: Config; sql: Sql; log: Logger; limiter: RateLimiter };

/** Who a relay session authenticated as: an API key, full or sending, and so its project. */
export type RelayUser = { projectId: string; keyId: string; keyHash: Buffer };

/**
 * A DATA stream read whole up to `limit` bytes, its header section checked as it streams. Once the
 * check refuses it or the limit is passed, the rest is read and dropped (the client is still
 * sending) and the answer is undefined.
 */
function readRelayed(stream: SMTPServerDataStream, limit: number, check: ReturnType<typeof headerSectionBounds>): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let dropping = false;
    stream.on('data', (chunk: Buffer) => {
      if (dropping) return;
      size += chunk.length;
      check.chunk(chunk);
      if (size > limit || check.refused) {
        dropping = true;
        chunks.length = 0;
        return;
      }
      chunks.push(chunk);
    });
    stream.once('error', reject);
    stream.once('end', () => resolve(dropping || stream.sizeExceeded ? undefined : Buffer.concat(chunks, size)));
  });
}

/** Whether the client declared 8-bit content on MAIL FROM. */
function declaresEightBit(session: SMTPServerSession): boolean {
  const args = (session.envelope.mailFrom && (session.envelope.mailFrom as { args?: Record<string, unknown> }).args) || {};
  return String(args.BODY ?? '').toUpperCase() === '8BITMIME' || args.SMTPUTF8 !== undefined;
}

/**
 * One message of an authenticated session, from its first byte to its reply: one request of the
 * project's rate limit, the size and byte rules, the headers, then the accept path every email
 * takes. Answers the email's id once its row is committed; throws an SmtpReply to refuse it.
 */
export async function submitMessage(deps: RelayDeps, stream: SMTPServerDataStream, session: SMTPServerSession): Promise<string> {
  // The content is arriving: the transaction about to start may wait a moment for this email.
  const arrival = announceQueued(deps.sql);
  try {
    return await acceptMessage(deps, stream, session, arrival);
  } finally {
    arrival.arrived();
  }
}

async function acceptMessage(deps: RelayDeps, stream: SMTPServerDataStream, session: SMTPServerSession, arrival: Arrival): Promise<string> {
  const { config } = deps;
  const user = session.user as unknown as RelayUser;
  // Charged while the message arrives, so the limiter's round trip is not one more wait before
  // the reply. Every message sent counts, an oversized one too.
  const charged = deps.limiter.hit(`project:${user.projectId}`, config.apiRateLimitPerMinute);
  const headerCheck = headerSectionBounds();
  const [raw, decision] = await Promise.all([readRelayed(stream, config.emailMaxMessageBytes, headerCheck), charged]);
  // Refused as it streamed: the rest was read and dropped, never kept or parsed.
  if (headerCheck.refused) throw headerCheck.refused;
  if (!raw) throw new SmtpReply(552, '5.3.4', `Message too large: the limit is ${config.emailMaxMessageBytes} bytes`);
  if (!decision.allowed) {
    throw new SmtpReply(451, '4.7.1', `Rate limit exceeded for this project; try again in ${decision.resetSeconds} seconds`);
  }
  const section = checkMessageBytes(raw, { eightBit: declaresEightBit(session) });
  const submission = await readSubmission(raw, section, session.envelope.rcptTo.map((r) => r.address));
  const { id, replayed } = await sendSubmitted(deps, user.projectId, submission, arrival);
  deps.log.debug({ projectId: user.projectId, emailId: id, replayed, bytes: raw.length }, 'relay accepted a message');
  return id;
}
