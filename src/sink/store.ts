import type { Sql } from '../platform/db.ts';
import { GroupCommit, groupCommitPerPool } from '../platform/group-commit.ts';
import { newId } from '../platform/ids.ts';
import type { ParsedSinkMessage } from './parse.ts';
import type { SinkMessageRow, SinkMessageSummaryRow } from './schemas.ts';

export type CaughtMessage = ParsedSinkMessage & { projectId: string; emailId: string | null; raw: Buffer };
export type SinkKeep = { messages: number; bytes: number };

/**
 * Stores a caught message, then prunes the project's sink to its newest `keep.messages`, and
 * within those to the newest that fit in `keep.bytes` of raw source (the newest always stays).
 * Resolves once the message is committed and the prune that saw it has run.
 *
 * Messages arriving together share one INSERT, and their projects one prune each: the prune
 * reads every kept row of the project, so running it per batch rather than per message is what
 * keeps a busy sink's cost flat. A batch whose insert fails is retried a message at a time.
 *
 * The prune runs after the insert commits, unlocked, so deliveries to one project commit side by
 * side: each prune sees every row committed before it, so the last one leaves exactly `keep`, and
 * a prune with an older view only deletes a subset of what a newer one does. Concurrent prunes
 * lock rows in the same index order, so they wait on each other rather than deadlock.
 */
export async function insertSinkMessage(sql: Sql, msg: CaughtMessage, keep: SinkKeep): Promise<string> {
  const id = newId('sinkMessage');
  await inserterFor(sql).run({ id, msg });
  await prunerFor(sql).run({ projectId: msg.projectId, keep });
  return id;
}

type Insert = { id: string; msg: CaughtMessage };

const inserterFor = groupCommitPerPool((sql) => new GroupCommit((items: Insert[]) => insertBatch(sql, items), { maxBatch: 64 }));

async function insertBatch(sql: Sql, items: Insert[]): Promise<void[]> {
  const rows = items.map(({ id, msg }) => ({
    id,
    project_id: msg.projectId,
    email_id: msg.emailId,
    from_address: msg.fromAddress,
    to_addresses: msg.toAddresses,
    cc_addresses: msg.ccAddresses,
    subject: msg.subject,
    text: msg.text,
    html: msg.html,
    headers: sql.json(msg.headers),
    attachments: sql.json(msg.attachments),
    raw: msg.raw,
    size_bytes: msg.raw.length,
  }));
  // One notify per project rides in the insert's statement: no extra round trip, fired at commit.
  await sql`
    with caught as (insert into sink_messages ${sql(rows)} returning project_id)
    select pg_notify(${SINK_CHANNEL}, project_id) from (select distinct project_id from caught) projects`;
  return items.map(() => undefined);
}

type Prune = { projectId: string; keep: SinkKeep };

const prunerFor = groupCommitPerPool((sql) => new GroupCommit((items: Prune[]) => pruneBatch(sql, items), { maxBatch: 64 }));

async function pruneBatch(sql: Sql, items: Prune[]): Promise<void[]> {
  const byProject = new Map(items.map((p) => [p.projectId, p.keep]));
  await Promise.all([...byProject].map(([projectId, keep]) => pruneProject(sql, projectId, keep)));
  return items.map(() => undefined);
}

function pruneProject(sql: Sql, projectId: string, keep: SinkKeep) {
  return sql`
    delete from sink_messages
    where project_id = ${projectId}
      and id <= (
        select id from (
          select id, row_number() over newest as n, sum(size_bytes) over newest as bytes
          from sink_messages where project_id = ${projectId}
          window newest as (order by id desc)
        ) kept
        where n > ${keep.messages} or (n > 1 and bytes > ${keep.bytes})
        order by id desc limit 1)`;
}

const SUMMARY = (sql: Sql) =>
  sql`id, email_id, from_address, to_addresses, cc_addresses, subject, received_at, size_bytes`;

/** Sink arrivals are announced on this channel, with the project id as payload, for live inboxes. */
export const SINK_CHANNEL = 'mailroom_sink_messages';

/** `search` matches, case-insensitively, inside the subject, the sender or any recipient. */
export type SinkListOptions = { limit: number; startingAfter?: string; search?: string };

/** Newest first; fetches one extra row to answer has_more without a count. */
export async function listSinkMessages(sql: Sql, projectId: string, opts: SinkListOptions) {
  const pattern = opts.search ? `%${opts.search.replace(/[\\%_]/g, (ch) => `\\${ch}`)}%` : undefined;
  const rows = await sql<SinkMessageSummaryRow[]>`
    select ${SUMMARY(sql)} from sink_messages
    where project_id = ${projectId}
      ${opts.startingAfter ? sql`and id < ${opts.startingAfter}` : sql``}
      ${pattern ? sql`and (subject ilike ${pattern} or from_address ilike ${pattern}
                        or array_to_string(to_addresses || cc_addresses, ' ') ilike ${pattern})` : sql``}
    order by id desc
    limit ${opts.limit + 1}`;
  return { rows: rows.slice(0, opts.limit), hasMore: rows.length > opts.limit };
}

/** Messages caught after `afterId`, oldest first: what a live inbox has not shown yet. */
export async function listSinkMessagesAfter(sql: Sql, projectId: string, afterId: string, limit: number) {
  return sql<SinkMessageSummaryRow[]>`
    select ${SUMMARY(sql)} from sink_messages
    where project_id = ${projectId} and id > ${afterId}
    order by id
    limit ${limit}`;
}

/** The caught copy of an email, when its project sends to the sink. */
export async function findSinkMessageOfEmail(sql: Sql, projectId: string, emailId: string) {
  const [row] = await sql<[{ id: string }?]>`
    select id from sink_messages where project_id = ${projectId} and email_id = ${emailId} order by id desc limit 1`;
  return row?.id;
}

export async function sinkMessageExists(sql: Sql, projectId: string, id: string): Promise<boolean> {
  const [row] = await sql`select 1 from sink_messages where id = ${id} and project_id = ${projectId}`;
  return row !== undefined;
}

export async function getSinkMessage(sql: Sql, projectId: string, id: string) {
  const [row] = await sql<[SinkMessageRow?]>`
    select ${SUMMARY(sql)}, text, html, headers, attachments, raw
    from sink_messages where id = ${id} and project_id = ${projectId}`;
  return row;
}

export async function deleteSinkMessages(sql: Sql, projectId: string): Promise<number> {
  const result = await sql`delete from sink_messages where project_id = ${projectId}`;
  return result.count;
}

/** Insert and prune statements this process has run, for the test that checks they are shared. */
export function sinkStatementCounts(sql: Sql) {
  return { inserts: inserterFor(sql).batchesWritten, prunes: prunerFor(sql).batchesWritten };
}
