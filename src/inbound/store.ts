import type { Sql, TxSql } from '../platform/db.ts';
import { newId } from '../platform/ids.ts';
import { recordEventsStatement } from '../events/record.ts';
import type { ParsedReceived } from './parse.ts';
import type { Verdicts } from './notification.ts';
import { insertReceived, type ReceivedRow } from './queries.ts';
import { findParent } from './threading.ts';
import { receivedEventData } from './schemas.ts';

export type Incoming = {
  sesMessageId: string;
  parsed: ParsedReceived;
  verdicts: Verdicts;
  /** The message's bytes when they came inline; an S3 delivery leaves them in the bucket. */
  raw: Buffer | null;
  s3: { bucket: string; key: string } | null;
  rawSize: number | null;
  contentTooLarge: boolean;
  /** Stored from the notification alone: the message was over a parse budget, unreadable, or poison (§22.4). */
  parseFailed?: boolean;
};

export type Target = { projectId: string; receivedFor: string[] };

/**
 * Stores the message once for each project, threaded, each with its `email.received` event and
 * webhook deliveries, all in one transaction: a repeat of the same SES message stores nothing
 * and fires nothing again. Answers the ids stored.
 */
export async function storeReceived(sql: Sql, targets: Target[], m: Incoming): Promise<string[]> {
  return sql.begin(async (tx) => (await storeReceivedIn(tx, [{ targets, incoming: m }]))[0]!);
}

/**
 * storeReceived for several messages inside the caller's transaction, so a batch commits once;
 * answers the ids stored for each. Every row is written before any event is recorded: recording
 * takes the shared side of each webhook endpoint's flush lock until the commit (see flushLock),
 * so it comes last and a flush waits for this transaction as short a time as can be.
 */
export async function storeReceivedIn(tx: TxSql, batch: { targets: Target[]; incoming: Incoming }[]): Promise<string[][]> {
  const written: { id: string; projectId: string; data: Record<string, unknown> }[][] = [];
  for (const { targets, incoming: m } of batch) {
    const rows: (typeof written)[number] = [];
    for (const t of targets) {
      const p = m.parsed;
      const id = newId('received');
      const parent = await findParent(tx, t.projectId, p.inReplyTo, p.references);
      const row: Omit<ReceivedRow, 'createdAt'> = {
        id,
        projectId: t.projectId,
        sesMessageId: m.sesMessageId,
        fromAddress: p.from,
        toAddresses: p.to,
        ccAddresses: p.cc,
        replyToAddresses: p.replyTo,
        receivedFor: t.receivedFor,
        subject: p.subject,
        messageIdHeader: p.messageId,
        inReplyTo: p.inReplyTo,
        references: p.references,
        html: p.html,
        text: p.text,
        strippedText: p.strippedText,
        headers: p.headers,
        attachments: p.attachments,
        hasRaw: m.raw !== null,
        s3Bucket: m.s3?.bucket ?? null,
        s3Key: m.s3?.key ?? null,
        rawSize: m.rawSize,
        verdicts: m.verdicts,
        isAutoReply: p.isAutoReply,
        isBounce: p.isBounce,
        inReplyToEmailId: parent?.emailId ?? null,
        threadId: parent?.threadId ?? id,
        contentTooLarge: m.contentTooLarge,
        parseFailed: m.parseFailed ?? false,
        bodyPurged: false,
      };
      const createdAt = await insertReceived(tx, { ...row, raw: m.raw });
      if (createdAt) rows.push({ id, projectId: t.projectId, data: receivedEventData({ ...row, createdAt }) });
    }
    written.push(rows);
  }
  for (const { id, projectId, data } of written.flat()) {
    const source = tx`select id, project_id, null::jsonb as tags from received_emails where id = ${id} and project_id = ${projectId}`;
    await recordEventsStatement(tx, source, [{ type: 'email.received', data }]);
  }
  return written.map((rows) => rows.map((r) => r.id));
}
