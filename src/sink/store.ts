import { withReservedConnection, type Sql } from '../platform/db.ts';
import { GroupCommit, groupCommitPerPool } from '../platform/group-commit.ts';
import { newId } from '../platform/ids.ts';
import type { ParsedSinkMessage } from './parse.ts';
import type { SinkMessageRow, SinkMessageSummaryRow } from './schemas.ts';
import { recordAudit } from '../audit/record.ts';

export type CaughtMessage = ParsedSinkMessage & { projectId: string; emailId: string | null; raw: Buffer };
export type SinkKeep = { messages: number; bytes: number };

/**
 * Stores a caught message, then prunes the project's sink to its newest `keep.messages`, and
 * within those to the newest that fit in `keep.bytes` of raw source (the newest always stays).
 * Resolves once the message is committed and the prune that saw it has run.
 *
 * Messages arriving together share one INSERT, and their projects one prune each, sent together
 * in one round trip. A batch whose insert fails is retried a message at a time. A prune that fails
 * after its insert committed does not undo or repeat the insert: the message is stored, the error
 * goes to `onPruneError`, and the next prune of the project deletes what this one left.
 *
 * Each project keeps a tally of the messages and bytes it has ever stored, and each message its
 * place in that order (`seq`) and the bytes stored before it, so a prune finds where the kept
 * messages begin with two index lookups, however many are kept. "Newest" is the order messages
 * were stored in: within a process that is id order, since batches are written one at a time in
 * the order their ids were made.
 *
 * Each prune is its own statement after the insert's: it reads the tally as committed, so the
 * last one leaves exactly `keep`, and a prune with an older view only deletes a subset of what a
 * newer one does.
 */
export async function insertSinkMessage(sql: Sql, msg: CaughtMessage, keep: SinkKeep, onPruneError?: (err: unknown) => void): Promise<string> {
  const id = newId('sinkMessage');
  await inserterFor(sql).run({ id, msg, keep, onPruneError });
  return id;
}

type Insert = { id: string; msg: CaughtMessage; keep: SinkKeep; onPruneError?: (err: unknown) => void };

// One batch at a time, so places in the tally follow the order the ids were made.
const inserterFor = groupCommitPerPool((sql) => new GroupCommit((items: Insert[]) => insertBatch(sql, items), { maxBatch: 64, maxInFlight: 1 }));
const prunesRun = new WeakMap<Sql, number>();

/**
 * Adds a batch to its projects' tallies and stores each message at its place in its project's
 * order: `seq_back` and `bytes_back` count back from the project's new totals. Projects are
 * locked in one order, so two processes adding to the same ones never deadlock. One notify per
 * project rides in the statement, fired at commit.
 */
const INSERT_STATEMENT = `
  with tallies as (
    insert into sink_tallies (project_id, messages, bytes)
    select project_id, messages, bytes from json_to_recordset($1::text::json) as a(project_id text, messages bigint, bytes bigint)
    order by project_id
    on conflict (project_id) do update
      set messages = sink_tallies.messages + excluded.messages, bytes = sink_tallies.bytes + excluded.bytes
    returning project_id, messages, bytes),
  caught as (
    insert into sink_messages (id, project_id, email_id, from_address, to_addresses, cc_addresses, subject,
                               text, html, headers, attachments, raw, size_bytes, seq, bytes_before)
    select m.id, m.project_id, m.email_id, m.from_address, m.to_addresses, m.cc_addresses, m.subject,
           m.text, m.html, m.headers, m.attachments, decode(m.raw, 'base64'), m.size_bytes,
           t.messages - m.seq_back, t.bytes - m.bytes_back
    from json_to_recordset($2::text::json) as m(id text, project_id text, email_id text, from_address text,
      to_addresses text[], cc_addresses text[], subject text, text text, html text, headers jsonb,
      attachments jsonb, raw text, size_bytes int, seq_back bigint, bytes_back bigint)
    join tallies t using (project_id)
    returning project_id)
  select pg_notify($3, project_id) from (select distinct project_id from caught) projects`;

async function insertBatch(sql: Sql, items: Insert[]): Promise<void[]> {
  const adding = new Map<string, { messages: number; bytes: number; keep: SinkKeep }>();
  for (const { msg, keep } of items) {
    const sum = adding.get(msg.projectId) ?? { messages: 0, bytes: 0, keep };
    sum.messages += 1;
    sum.bytes += msg.raw.length;
    adding.set(msg.projectId, sum);
  }
  const placed = new Map([...adding].map(([projectId, sum]) => [projectId, { seqBack: sum.messages, bytesBack: sum.bytes }]));
  const rows = items.map(({ id, msg }) => {
    const place = placed.get(msg.projectId)!;
    place.seqBack -= 1;
    const row = {
      id, project_id: msg.projectId, email_id: msg.emailId,
      from_address: msg.fromAddress, to_addresses: msg.toAddresses, cc_addresses: msg.ccAddresses,
      subject: msg.subject, text: msg.text, html: msg.html, headers: msg.headers, attachments: msg.attachments,
      raw: msg.raw.toString('base64'), size_bytes: msg.raw.length,
      seq_back: place.seqBack, bytes_back: place.bytesBack,
    };
    place.bytesBack -= msg.raw.length;
    return row;
  });
  const additions = [...adding].map(([projectId, sum]) => ({ project_id: projectId, messages: sum.messages, bytes: sum.bytes }));

  // The prunes go out behind the insert on the same connection: one round trip for the batch.
  await withReservedConnection(sql, async (connection, met) => {
    // A query goes out when first awaited: the insert is, before the prunes are made. It is
    // prepared: its plan reads no table, so the generic plan is the only one, and unprepared it
    // would cost a round trip more (postgres.js has its parameters described first).
    const failed = (what: string) => (err: unknown) => {
      met(err);
      return err ?? `${what} failed`;
    };
    const inserted = connection.unsafe(INSERT_STATEMENT, [JSON.stringify(additions), JSON.stringify(rows), SINK_CHANNEL], { prepare: true })
      .then(() => undefined, failed('insert'));
    const pruned = [...adding].map(([projectId, { keep }]) => pruneProject(connection, projectId, keep).then(() => undefined, failed('prune')));
    prunesRun.set(sql, (prunesRun.get(sql) ?? 0) + pruned.length);
    const insertFailed = await inserted;
    const pruneFailed = (await Promise.all(pruned)).find((err) => err !== undefined);
    if (insertFailed !== undefined) throw insertFailed;
    if (pruneFailed !== undefined) for (const { onPruneError } of items) onPruneError?.(pruneFailed);
  });
  return items.map(() => undefined);
}

/** `sink_prune` plans its statement for the values of each call: a plan kept from when the sink was small would scan it whole. */
function pruneProject(sql: Sql, projectId: string, keep: SinkKeep) {
  return sql`select sink_prune(${projectId}, ${keep.messages}, ${keep.bytes})`;
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

/** Empties the project's sink; `sink.cleared` is recorded in the same transaction (§22.10). */
export async function deleteSinkMessages(sql: Sql, projectId: string): Promise<number> {
  return sql.begin(async (tx) => {
    const result = await tx`delete from sink_messages where project_id = ${projectId}`;
    await recordAudit(tx, { action: 'sink.cleared', projectId, target: { type: 'sink', id: projectId }, changes: { removed: result.count } });
    return result.count;
  });
}

/** Insert and prune statements this process has run, for the test that checks they are shared. */
export function sinkStatementCounts(sql: Sql) {
  return { inserts: inserterFor(sql).batchesWritten, prunes: prunesRun.get(sql) ?? 0 };
}
