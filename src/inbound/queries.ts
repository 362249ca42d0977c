import type { Sql, TxSql } from '../platform/db.ts';
import type { ReceivedAttachment } from './parse.ts';
import type { Verdicts } from './notification.ts';

export type ReceivedRow = {
  id: string;
  projectId: string;
  sesMessageId: string;
  fromAddress: string;
  toAddresses: string[];
  ccAddresses: string[];
  replyToAddresses: string[];
  receivedFor: string[];
  subject: string;
  messageIdHeader: string | null;
  inReplyTo: string | null;
  references: string[];
  html: string | null;
  text: string | null;
  strippedText: string | null;
  headers: Record<string, string>;
  attachments: ReceivedAttachment[];
  hasRaw: boolean;
  s3Bucket: string | null;
  s3Key: string | null;
  rawSize: number | null;
  verdicts: Verdicts;
  isAutoReply: boolean;
  isBounce: boolean;
  inReplyToEmailId: string | null;
  threadId: string;
  contentTooLarge: boolean;
  parseFailed: boolean;
  bodyPurged: boolean;
  createdAt: Date;
};

export type NewReceived = Omit<ReceivedRow, 'hasRaw' | 'bodyPurged' | 'createdAt' | 'rawSize'> & { raw: Buffer | null; rawSize: number | null };

const COLUMNS = (sql: Sql | TxSql) => sql`
  id, project_id, ses_message_id, from_address, to_addresses, cc_addresses, reply_to_addresses, received_for, subject,
  message_id_header, in_reply_to, "references", html, text, stripped_text, headers, attachments, raw is not null as has_raw,
  s3_bucket, s3_key, raw_size, verdicts, is_auto_reply, is_bounce, in_reply_to_email_id, thread_id, content_too_large,
  parse_failed, body_purged, created_at`;

/**
 * The receiving domains among the given ones (lower-cased) of projects connected to one of the
 * given SES accounts, each with the bucket and prefix its set-up named and whether its project
 * holds this SES message already. This is how a message finds its project, so it is the one
 * query that looks across projects: bounded by the accounts of the queue or topic that carried
 * the notification, never by the recipient's domain alone.
 */
export async function projectsReceivingAt(sql: Sql | TxSql, sesAccountIds: string[], domains: string[], sesMessageId: string) {
  return sql<{ projectId: string; domain: string; bucket: string | null; prefix: string; holding: boolean }[]>`
    select d.project_id, lower(d.value) as domain, d.receiving->>'bucket' as bucket, coalesce(d.receiving->>'prefix', '') as prefix,
      exists (select 1 from received_emails r where r.project_id = d.project_id and r.ses_message_id = ${sesMessageId}) as holding
    from domains d
    join provider_connections c on c.project_id = d.project_id
    where lower(d.value) = any(${domains}::text[]) and d.receiving is not null
      and c.ses_account_id = any(${sesAccountIds}::bigint[])
    order by d.project_id, lower(d.value)`;
}

/** Inserts the row unless the project holds the SES message already; answers its creation time if it did. */
export async function insertReceived(tx: TxSql, r: NewReceived): Promise<Date | undefined> {
  const [row] = await tx<[{ createdAt: Date }?]>`
    insert into received_emails (id, project_id, ses_message_id, from_address, to_addresses, cc_addresses, reply_to_addresses,
      received_for, subject, message_id_header, in_reply_to, "references", html, text, stripped_text, headers, attachments,
      raw, s3_bucket, s3_key, raw_size, verdicts, is_auto_reply, is_bounce, in_reply_to_email_id, thread_id, content_too_large, parse_failed)
    values (${r.id}, ${r.projectId}, ${r.sesMessageId}, ${r.fromAddress}, ${r.toAddresses}, ${r.ccAddresses}, ${r.replyToAddresses},
      ${r.receivedFor}, ${r.subject}, ${r.messageIdHeader}, ${r.inReplyTo}, ${r.references}, ${r.html}, ${r.text}, ${r.strippedText},
      ${tx.json(r.headers)}, ${tx.json(r.attachments as never)}, ${r.raw}, ${r.s3Bucket}, ${r.s3Key}, ${r.rawSize},
      ${tx.json(r.verdicts)}, ${r.isAutoReply}, ${r.isBounce}, ${r.inReplyToEmailId}, ${r.threadId}, ${r.contentTooLarge}, ${r.parseFailed})
    on conflict (project_id, ses_message_id) do nothing
    returning created_at`;
  return row?.createdAt;
}

export async function getReceived(sql: Sql, projectId: string, id: string) {
  const [row] = await sql<[ReceivedRow?]>`select ${COLUMNS(sql)} from received_emails where id = ${id} and project_id = ${projectId}`;
  return row;
}

/** The raw message kept in PostgreSQL (inline deliveries), when there is one. */
export async function getReceivedRaw(sql: Sql, projectId: string, id: string) {
  const [row] = await sql<[{ raw: Buffer | null }?]>`select raw from received_emails where id = ${id} and project_id = ${projectId}`;
  return row?.raw ?? null;
}

export async function receivedExists(sql: Sql, projectId: string, id: string) {
  const [row] = await sql`select 1 from received_emails where id = ${id} and project_id = ${projectId}`;
  return row !== undefined;
}

/** Newest first, paged by id: `startingAfter` pages back in time, `before` forward (Resend's `before`). */
export async function listReceived(sql: Sql, projectId: string, opts: { limit: number; startingAfter?: string; before?: string }) {
  const rows = opts.before
    ? (await sql<ReceivedRow[]>`
        select ${COLUMNS(sql)} from received_emails where project_id = ${projectId} and id > ${opts.before}
        order by id asc limit ${opts.limit + 1}`)
    : await sql<ReceivedRow[]>`
        select ${COLUMNS(sql)} from received_emails where project_id = ${projectId}
          ${opts.startingAfter ? sql`and id < ${opts.startingAfter}` : sql``}
        order by id desc limit ${opts.limit + 1}`;
  const page = rows.slice(0, opts.limit);
  return { rows: opts.before ? page.reverse() : page, hasMore: rows.length > opts.limit };
}

/** The received emails that answer a sent email, oldest first. */
export async function repliesTo(sql: Sql, projectId: string, emailId: string) {
  const rows = await sql<{ id: string }[]>`
    select id from received_emails where project_id = ${projectId} and in_reply_to_email_id = ${emailId} order by id limit 1000`;
  return rows.map((r) => r.id);
}
