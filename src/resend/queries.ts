import type { Sql } from '../platform/db.ts';
import type { StoredEmail } from './translate.ts';

/** A relayed email's bodies were read from its message once, as it was accepted: no read parses it. */
const COLUMNS = (sql: Sql) => sql`
  e.id, e.status, e.from_address, e.to_addresses, e.cc_addresses, e.bcc_addresses, e.reply_to_addresses,
  e.subject, e.html, e.text, e.created_at, e.scheduled_at, e.tags,
  (select ev.type from events ev where ev.email_id = e.id and ev.project_id = e.project_id
   order by ev.created_at desc, ev.id desc limit 1) as last_event_type`;

export async function getResendEmail(sql: Sql, projectId: string, emailId: string) {
  const [row] = await sql<[StoredEmail?]>`select ${COLUMNS(sql)} from emails e where e.id = ${emailId} and e.project_id = ${projectId}`;
  return row;
}

/** Newest first; `after` pages to older emails, `before` to newer ones (Resend's cursors). */
export async function listResendEmails(sql: Sql, projectId: string, opts: { limit: number; after?: string; before?: string }) {
  const rows = opts.before
    ? (await sql<StoredEmail[]>`
        select ${COLUMNS(sql)} from emails e where e.project_id = ${projectId} and e.id > ${opts.before}
        order by e.id asc limit ${opts.limit + 1}`).reverse()
    : await sql<StoredEmail[]>`
        select ${COLUMNS(sql)} from emails e where e.project_id = ${projectId}
          ${opts.after ? sql`and e.id < ${opts.after}` : sql``}
        order by e.id desc limit ${opts.limit + 1}`;
  const hasMore = rows.length > opts.limit;
  const page = opts.before ? rows.slice(rows.length - Math.min(rows.length, opts.limit)) : rows.slice(0, opts.limit);
  return { rows: page, hasMore };
}
