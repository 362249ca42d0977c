import { plannedEachTime, type Sql } from '../platform/db.ts';
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
 * Messages arriving together share one INSERT, and their projects one prune each. A batch whose
 * insert fails is retried a message at a time.
 *
 * Each project keeps a tally of the messages and bytes it has ever stored, and each message its
 * place in that order (`seq`) and the bytes stored before it, so a prune finds where the kept
 * messages begin with two index lookups, however many are kept. "Newest" is the order messages
 * were stored in: within a process that is id order, since batches are written one at a time in
 * the order their ids were made.
 *
 * The prune runs after the insert commits, unlocked: each prune reads the tally as committed, so
 * the last one leaves exactly `keep`, and a prune with an older view only deletes a subset of
 * what a newer one does.
 */
export async function insertSinkMessage(sql: Sql, msg: CaughtMessage, keep: SinkKeep): Promise<string> {
  const id = newId('sinkMessage');
  await inserterFor(sql).run({ id, msg });
  await prunerFor(sql).run({ projectId: msg.projectId, keep });
  return id;
}

type Insert = { id: string; msg: CaughtMessage };

// One batch at a time, so places in the tally follow the order the ids were made.
const inserterFor = groupCommitPerPool((sql) => new GroupCommit((items: Insert[]) => insertBatch(sql, items), { maxBatch: 64, maxInFlight: 1 }));

async function insertBatch(sql: Sql, items: Insert[]): Promise<void[]> {
  const adding = new Map<string, { messages: number; bytes: number }>();
  for (const { msg } of items) {
    const sum = adding.get(msg.projectId) ?? { messages: 0, bytes: 0 };
    sum.messages += 1;
    sum.bytes += msg.raw.length;
    adding.set(msg.projectId, sum);
  }
  await sql.begin(async (tx) => {
    // Projects in one order, so two processes adding to the same ones never deadlock.
    const additions = [...adding].sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([projectId, sum]) => ({ project_id: projectId, messages: sum.messages, bytes: sum.bytes }));
    const tallies = await tx<{ projectId: string; messages: string; bytes: string }[]>`
      insert into sink_tallies ${tx(additions)}
      on conflict (project_id) do update
        set messages = sink_tallies.messages + excluded.messages, bytes = sink_tallies.bytes + excluded.bytes
      returning project_id, messages, bytes`;
    // Where this batch starts in each project's order: the new totals less what it adds.
    const next = new Map(tallies.map((t) => {
      const sum = adding.get(t.projectId)!;
      return [t.projectId, { seq: Number(t.messages) - sum.messages + 1, bytesBefore: Number(t.bytes) - sum.bytes }];
    }));
    const rows = items.map(({ id, msg }) => {
      const place = next.get(msg.projectId)!;
      const row = {
        id,
        project_id: msg.projectId,
        email_id: msg.emailId,
        from_address: msg.fromAddress,
        to_addresses: msg.toAddresses,
        cc_addresses: msg.ccAddresses,
        subject: msg.subject,
        text: msg.text,
        html: msg.html,
        headers: tx.json(msg.headers),
        attachments: tx.json(msg.attachments),
        raw: msg.raw,
        size_bytes: msg.raw.length,
        seq: place.seq,
        bytes_before: place.bytesBefore,
      };
      place.seq += 1;
      place.bytesBefore += msg.raw.length;
      return row;
    });
    // One notify per project rides in the insert's statement: no extra round trip, fired at commit.
    await tx`
      with caught as (insert into sink_messages ${tx(rows)} returning project_id)
      select pg_notify(${SINK_CHANNEL}, project_id) from (select distinct project_id from caught) projects`;
  });
  return items.map(() => undefined);
}

type Prune = { projectId: string; keep: SinkKeep };

const prunerFor = groupCommitPerPool((sql) => new GroupCommit((items: Prune[]) => pruneBatch(sql, items), { maxBatch: 64 }));

async function pruneBatch(sql: Sql, items: Prune[]): Promise<void[]> {
  const byProject = new Map(items.map((p) => [p.projectId, p.keep]));
  await Promise.all([...byProject].map(([projectId, keep]) => pruneProject(sql, projectId, keep)));
  return items.map(() => undefined);
}

/**
 * Deletes every message before the first one kept: the later of the first of the newest
 * `messages` and the first of those that fit in `bytes`, and never the newest. Planned each time,
 * since a plan cached while the project's sink was small would scan it whole.
 */
export const PRUNE_STATEMENT = `
  with tally as (select messages, bytes from sink_tallies where project_id = $1),
  last_dropped as (
    select least(
      (select messages - 1 from tally),
      greatest(
        (select messages - $2 from tally),
        (select seq from sink_messages
         where project_id = $1 and bytes_before < (select bytes - $3 from tally)
         order by bytes_before desc, seq desc limit 1))) as seq)
  delete from sink_messages
  where project_id = $1 and seq <= (select seq from last_dropped)`;

function pruneProject(sql: Sql, projectId: string, keep: SinkKeep) {
  return plannedEachTime(sql, PRUNE_STATEMENT, [projectId, keep.messages, keep.bytes]);
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
