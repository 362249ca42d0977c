import type postgres from 'postgres';
import type { Sql, TxSql } from '../../platform/db.ts';
import type { ImportPlan } from './options.ts';

type Db = Sql | TxSql;
export type ImportStatus = 'queued' | 'in_progress' | 'completed' | 'failed';
export type ImportError = { line: number; reason: string };

export type ImportRow = {
  id: string;
  projectId: string;
  status: ImportStatus;
  onConflict: 'upsert' | 'skip';
  header: string[];
  plan: ImportPlan;
  segmentIds: string[];
  topics: Array<{ id: string; subscription: 'opt_in' | 'opt_out' }>;
  bytesTotal: number;
  bytesDone: number;
  linesDone: number;
  total: number;
  created: number;
  updated: number;
  skipped: number;
  failed: number;
  errors: ImportError[];
  failureReason: string | null;
  createdAt: Date;
  startedAt: Date | null;
  completedAt: Date | null;
};

const COLUMNS = (sql: Db) => sql`
  id, project_id, status, on_conflict, header, plan, segment_ids, topics, bytes_total::float8 as bytes_total,
  bytes_done::float8 as bytes_done, lines_done::float8 as lines_done, total, created, updated, skipped, failed, errors,
  failure_reason, created_at, started_at, completed_at`;

/** The project's declared contact properties, key → type. */
export async function declaredProperties(sql: Db, projectId: string): Promise<Map<string, 'string' | 'number'>> {
  const rows = await sql<{ key: string; type: 'string' | 'number' }[]>`select key, type from contact_properties where project_id = ${projectId}`;
  return new Map(rows.map((r) => [r.key, r.type]));
}

export async function existingSegments(sql: Db, projectId: string, ids: string[]): Promise<Set<string>> {
  if (!ids.length) return new Set();
  const rows = await sql<{ id: string }[]>`select id from segments where project_id = ${projectId} and id = any(${ids}::text[])`;
  return new Set(rows.map((r) => r.id));
}

export async function existingTopics(sql: Db, projectId: string, ids: string[]): Promise<Set<string>> {
  if (!ids.length) return new Set();
  const rows = await sql<{ id: string }[]>`select id from topics where project_id = ${projectId} and id = any(${ids}::text[])`;
  return new Set(rows.map((r) => r.id));
}

/** One piece of an upload. The import's row follows in the same transaction (the key is deferred). */
export async function insertChunk(tx: TxSql, projectId: string, importId: string, seq: number, startByte: number, data: Buffer) {
  await tx`
    insert into contact_import_chunks (import_id, project_id, seq, start_byte, data)
    values (${importId}, ${projectId}, ${seq}, ${startByte}, ${data})`;
}

/** The piece of the upload holding byte `offset`, or the one after piece `seq`. */
export async function chunkAt(sql: Db, projectId: string, importId: string, at: { offset: number } | { after: number }) {
  const [row] = await sql<[{ seq: number; startByte: number; data: Buffer }?]>`
    select seq, start_byte::float8 as start_byte, data from contact_import_chunks
    where import_id = ${importId} and project_id = ${projectId}
      and ${'offset' in at ? sql`start_byte <= ${at.offset}` : sql`seq > ${at.after}`}
    order by seq ${'offset' in at ? sql`desc` : sql`asc`} limit 1`;
  return row;
}

export type NewImport = { id: string; projectId: string; onConflict: string; header: string[]; plan: ImportPlan; segmentIds: string[]; topics: unknown[]; bytesTotal: number; bytesDone: number; linesDone: number };

/** The import's row and its job, in one statement inside the upload's transaction. */
export async function insertImport(tx: TxSql, i: NewImport) {
  const [row] = await tx<[{ id: string; createdAt: Date }]>`
    with created as (
      insert into contact_imports (id, project_id, on_conflict, header, plan, segment_ids, topics, bytes_total, bytes_done, lines_done)
      values (${i.id}, ${i.projectId}, ${i.onConflict}, ${i.header}::text[], ${tx.json(i.plan)}::jsonb, ${i.segmentIds}::text[],
              ${tx.json(i.topics as never)}::jsonb, ${i.bytesTotal}, ${i.bytesDone}, ${i.linesDone})
      returning id, project_id, created_at
    )
    select id, created_at, graphile_worker.add_job('contacts_import__run',
      json_build_object('import_id', id, 'project_id', project_id),
      max_attempts => 10, priority => 10, job_key => 'contacts_import:' || id) is not null as queued
    from created`;
  return row;
}

export async function getImport(sql: Db, projectId: string, id: string) {
  const [row] = await sql<[ImportRow?]>`select ${COLUMNS(sql)} from contact_imports where id = ${id} and project_id = ${projectId}`;
  return row;
}

/** Newest first; `endingBefore` pages back towards the newest. */
export async function listImports(sql: Db, projectId: string, opts: { limit: number; startingAfter?: string; endingBefore?: string; status?: ImportStatus }) {
  const status = opts.status ? sql`and status = ${opts.status}` : sql``;
  const rows = opts.endingBefore
    ? (await sql<ImportRow[]>`
        select ${COLUMNS(sql)} from contact_imports where project_id = ${projectId} and id > ${opts.endingBefore} ${status}
        order by id asc limit ${opts.limit + 1}`).reverse()
    : await sql<ImportRow[]>`
        select ${COLUMNS(sql)} from contact_imports where project_id = ${projectId} ${status}
          ${opts.startingAfter ? sql`and id < ${opts.startingAfter}` : sql``}
        order by id desc limit ${opts.limit + 1}`;
  const hasMore = rows.length > opts.limit;
  return { rows: opts.endingBefore ? rows.slice(Math.max(0, rows.length - opts.limit)) : rows.slice(0, opts.limit), hasMore };
}

/** Marks a queued or resumed import as running; nothing for one already finished. */
export async function startImport(sql: Db, projectId: string, id: string) {
  const [row] = await sql<[ImportRow?]>`
    update contact_imports set status = 'in_progress', started_at = coalesce(started_at, now())
    where id = ${id} and project_id = ${projectId} and status in ('queued', 'in_progress')
    returning ${COLUMNS(sql)}`;
  return row;
}

/** Fragments one after the other; postgres.js takes an empty list for a value. */
const each = (sql: Db, fragments: postgres.PendingQuery<postgres.Row[]>[]) => (fragments.length ? fragments : sql``);

export type MergePlan = Pick<ImportRow, 'onConflict' | 'segmentIds' | 'topics'> & { properties: ImportPlan['properties'] };

/**
 * A batch of checked rows into the project's contacts, in one statement. `columns` are the
 * rows' values (rows.ts `RowValues`), a column each, sent as arrays; an empty string is no value.
 * New addresses are inserted under `ids`; with `upsert`, contacts of the others take the row's
 * non-empty fields and their properties merge; every contact inserted or updated joins the
 * segments and takes the topics' subscriptions (a segment or topic deleted meanwhile is passed
 * over). Properties are built in SQL from a column each, so no row is written as JSON in between.
 * The update sees the contacts as they were before the statement, so an address is never both
 * created and updated; the batch holds an address once.
 */
export async function mergeBatch(tx: TxSql, projectId: string, plan: MergePlan, ids: string[], columns: string[][]) {
  const [emails, firstNames, lastNames, flags, ...props] = columns;
  const name = (n: number) => tx(`p${n}`);
  const properties = plan.properties.length
    ? tx`jsonb_strip_nulls(jsonb_build_object(${plan.properties.map((p, n) => tx`${n ? tx`,` : tx``} ${p.key}::text,
        nullif(i.${name(n)}, '')${p.type === 'number' ? tx`::numeric` : tx``}`)}))`
    : tx`'{}'::jsonb`;
  const updated = plan.onConflict === 'upsert'
    ? tx`
        update contacts c set
          first_name = coalesce(nullif(i.first_name, ''), c.first_name),
          last_name = coalesce(nullif(i.last_name, ''), c.last_name),
          unsubscribed = coalesce(nullif(i.unsubscribed, '')::bool, c.unsubscribed),
          properties = c.properties || ${properties},
          updated_at = now()
        from i
        where not exists (select from created where created.id = i.id)
          and c.project_id = ${projectId} and lower(c.email) = lower(i.email)
        returning c.id`
    : tx`select null::text as id where false`;
  const segmented = plan.segmentIds.length
    ? tx`, segmented as (
        insert into contact_segments (segment_id, contact_id, project_id)
        select s.id, t.id, ${projectId}
        from segments s cross join touched t
        where s.project_id = ${projectId} and s.id = any(${plan.segmentIds}::text[])
        on conflict do nothing)`
    : tx``;
  const subscribed = plan.topics.length
    ? tx`, subscribed as (
        insert into contact_topics (contact_id, topic_id, project_id, subscription)
        select t.id, p.id, ${projectId}, w.subscription
        from unnest(${plan.topics.map((w) => w.id)}::text[], ${plan.topics.map((w) => w.subscription)}::text[]) as w(id, subscription)
        join topics p on p.id = w.id and p.project_id = ${projectId}
        cross join touched t
        on conflict (contact_id, topic_id) do update set subscription = excluded.subscription, updated_at = now())`
    : tx``;
  const [row] = await tx<[{ created: number; updated: number }]>`
    with i as (
      select * from unnest(${ids}::text[], ${emails!}::text[], ${firstNames!}::text[], ${lastNames!}::text[], ${flags!}::text[]
        ${each(tx, props.map((values) => tx`, ${values}::text[]`))})
        as i(id, email, first_name, last_name, unsubscribed ${each(tx, props.map((_, n) => tx`, ${name(n)}`))})
    ), created as (
      insert into contacts (id, project_id, email, first_name, last_name, unsubscribed, properties)
      select i.id, ${projectId}, i.email, nullif(i.first_name, ''), nullif(i.last_name, ''),
        coalesce(nullif(i.unsubscribed, '')::bool, false), ${properties}
      from i
      on conflict (project_id, lower(email)) do nothing
      returning id
    ), updated as (${updated}),
    touched as (select id from created union all select id from updated)
    ${segmented} ${subscribed}
    select (select count(*) from created)::int as created, (select count(*) from updated)::int as updated`;
  return row;
}

export type Advance = { fromBytes: number; bytes: number; lines: number; total: number; created: number; updated: number; skipped: number; failed: number; errors: ImportError[] };

/**
 * Moves the cursor past a batch and adds its counts, only from where this run found it: a run
 * that lost the import to another answers false and its transaction is rolled back.
 */
export async function advanceImport(tx: TxSql, projectId: string, id: string, a: Advance): Promise<boolean> {
  const rows = await tx`
    update contact_imports set bytes_done = ${a.bytes}, lines_done = ${a.lines},
      total = total + ${a.total}, created = created + ${a.created}, updated = updated + ${a.updated},
      skipped = skipped + ${a.skipped}, failed = failed + ${a.failed}, errors = errors || ${tx.json(a.errors)}::jsonb
    where id = ${id} and project_id = ${projectId} and status = 'in_progress' and bytes_done = ${a.fromBytes}`;
  return rows.count === 1;
}

/** The end of an import, completed or failed; its upload is dropped in the same statement. */
export async function finishImport(sql: Db, projectId: string, id: string, status: 'completed' | 'failed', reason: string | null = null) {
  await sql`
    with done as (
      update contact_imports set status = ${status}, failure_reason = ${reason}, completed_at = now()
      where id = ${id} and project_id = ${projectId} and status in ('queued', 'in_progress')
      returning id
    )
    delete from contact_import_chunks where import_id in (select id from done) and project_id = ${projectId}`;
}
