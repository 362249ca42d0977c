import postgres from 'postgres';

/**
 * Moving a database from before the time partitions (migration 000022) to day partitions, a day
 * per transaction.
 *
 * 000022 does the whole move in one transaction: every day of history gets four tables, each with
 * its indexes, all locked until the commit, about 30 locks a day. PostgreSQL's lock table holds
 * max_locks_per_transaction (64) × max_connections (100) locks for the whole server, so a database
 * with more than about 200 days of history fails with "out of shared memory" and rolls back.
 * Committed migrations are never edited (installations already applied them), so the migrate
 * command does the same move before graphile-migrate reaches 000022, in steps whose locks are
 * bounded whatever the history: one short transaction swaps in the partitioned tables (empty, with
 * their indexes), then each day is built as a plain table, filled, indexed and attached in a
 * transaction of its own (as 000023 makes a day), then the old tables go. 000022 then finds
 * `emails` partitioned and its move does nothing. The end state is the one 000022 to 000024 leave.
 *
 * Re-runnable: a step interrupted rolls back alone; the next run finds the attached days done and
 * goes on from there. The service must be stopped meanwhile (docs/operations.md), as for 000022.
 * 000028 (email_recipients, a partition for each of emails') is done the same way, below.
 */

/** The migration whose move this prepares, as graphile-migrate records it. */
export const PARTITIONS_MIGRATION = '000022.sql';

type Sql = postgres.Sql;
const TABLES = ['emails', 'events', 'webhook_deliveries', 'email_tags'] as const;
type Table = (typeof TABLES)[number];
const KEY: Record<Table, string> = { emails: 'id', events: 'email_id', webhook_deliveries: 'email_id', email_tags: 'email_id' };

/** True while the move is still to do or half done: `emails` is a plain table, or the old tables remain. */
export async function partitionMoveNeeded(sql: Sql | postgres.TransactionSql): Promise<boolean> {
  const [row] = await sql<{ kind: string | null; old: boolean }[]>`
    select (select relkind::text from pg_class where oid = to_regclass('emails')) as kind,
           to_regclass('emails_unpartitioned') is not null as old`;
  return row!.kind === 'r' || row!.old;
}

/**
 * Does the move on a database whose committed migrations stand just before 000022 (or that a
 * previous run left half moved). Returns how many day slices it built.
 */
export async function movePartitionsInSteps(sql: Sql): Promise<number> {
  if (!(await partitionMoveNeeded(sql))) return 0;
  await swapInPartitionedTables(sql);
  const indexes = await parentIndexes(sql);
  let built = 0;
  const days = await slices(sql);
  for (const slice of days) {
    if (await buildSlice(sql, slice, indexes)) built++;
  }
  await dropOldTables(sql, days.at(-1)!.high);
  // Outside a transaction, ANALYZE takes each partition in a transaction of its own.
  await sql.unsafe('analyze emails, events, webhook_deliveries, email_tags');
  return built;
}

/**
 * One short transaction: the old tables are renamed (and their indexes, whose names the new ones
 * take), and the partitioned tables made empty, with the same columns, constraints and indexes
 * 000022 gives them, and without the foreign keys to projects and endpoints that 000024 removes.
 */
async function swapInPartitionedTables(sql: Sql) {
  await sql.begin(async (tx) => {
    const [kind] = await tx`select relkind::text as kind from pg_class where oid = 'emails'::regclass`;
    if (kind!.kind === 'p') return;
    await tx`lock table emails, events, webhook_deliveries, email_tags, idempotency_keys in access exclusive mode`;
    // As 000022 makes and fills it (it finds it made): the relay's recent Message-IDs.
    await tx`create table if not exists submitted_message_ids (
      project_id text not null references projects(id) on delete cascade,
      message_id text not null,
      email_id text not null,
      created_at timestamptz not null default now(),
      primary key (project_id, message_id))`;
    await tx`create index if not exists submitted_message_ids_created_idx on submitted_message_ids (created_at)`;
    await tx`insert into submitted_message_ids (project_id, message_id, email_id, created_at)
      select project_id, submitted_message_id, id, created_at from emails
      where submitted_message_id is not null and created_at > now() - interval '24 hours'
      on conflict do nothing`;
    await tx`alter table idempotency_keys drop constraint if exists idempotency_keys_email_id_fkey`;
    for (const table of TABLES) {
      await tx.unsafe(`alter table ${table} rename to ${table}_unpartitioned`);
      // Index names are the schema's: the new tables' take the old ones'.
      const olds = await tx<{ name: string; oid: number }[]>`
        select c.relname as name, c.oid::int as oid from pg_index i join pg_class c on c.oid = i.indexrelid
        where i.indrelid = ${`${table}_unpartitioned`}::regclass`;
      for (const { name, oid } of olds) await tx.unsafe(`alter index "${name}" rename to unpartitioned_index_${oid}`);
    }
    await tx.unsafe(`
      create table emails (like emails_unpartitioned including defaults including constraints) partition by range (id);
      create table events (like events_unpartitioned including defaults) partition by range (email_id);
      alter table events add constraint events_type_check check (type = any (array['email.sent', 'email.delivered',
        'email.delivery_delayed', 'email.bounced', 'email.complained', 'email.failed', 'email.opened', 'email.clicked']));
      create table webhook_deliveries (like webhook_deliveries_unpartitioned including defaults including constraints,
        email_id text not null) partition by range (email_id);
      create table email_tags (like email_tags_unpartitioned including defaults) partition by range (email_id);

      alter table emails add primary key (id);
      create index emails_body_kept_idx on emails (created_at) where not body_purged;
      create index emails_created_idx on emails (created_at);
      create index emails_project_idx on emails (project_id, id desc);
      create index emails_project_sent_at_idx on emails (project_id, sent_at) where sent_at is not null;
      create index emails_project_status_idx on emails (project_id, status, id desc);
      create index emails_provider_message_id_idx on emails (provider_message_id) where provider_message_id is not null;

      alter table events add primary key (id, email_id);
      create unique index events_dedupe_idx on events (project_id, dedupe_key, email_id) where dedupe_key is not null;
      create index events_email_id_idx on events (email_id, project_id, id);

      alter table webhook_deliveries add primary key (id, email_id);
      create index webhook_deliveries_endpoint_idx on webhook_deliveries (project_id, endpoint_id, id desc);
      create index webhook_deliveries_event_idx on webhook_deliveries (email_id, event_id);
      create unique index webhook_deliveries_first_idx on webhook_deliveries (endpoint_id, event_id, email_id) where redelivery_of is null;
      create index webhook_deliveries_pending_idx on webhook_deliveries (next_attempt_at) where status = 'pending';
      create index webhook_deliveries_redelivery_idx on webhook_deliveries (redelivery_of) where redelivery_of is not null;
      create index webhook_deliveries_unattempted_idx on webhook_deliveries (endpoint_id, id) where status = 'pending' and attempt_count = 0;

      alter table email_tags add primary key (project_id, name, value, email_id);`);
  });
}

type Slice = { suffix: string; low: string | null; high: string };

/**
 * The partitions 000022 would make: one per UTC day from the oldest email (or today) to a week
 * ahead, and `_before` for ids below that first day (rows made by hand).
 */
async function slices(sql: Sql): Promise<Slice[]> {
  const [range] = await sql<{ firstDay: string; lastDay: string }[]>`
    select to_char((least((select min(created_at) from emails_unpartitioned), now()) at time zone 'UTC')::date, 'YYYY-MM-DD') as first_day,
           to_char((now() at time zone 'UTC')::date + 7, 'YYYY-MM-DD') as last_day`;
  const first = Date.parse(`${range!.firstDay}T00:00:00Z`);
  const last = Date.parse(`${range!.lastDay}T00:00:00Z`);
  const out: Slice[] = [];
  const [below] = await sql<{ any: boolean }[]>`select exists (select 1 from emails_unpartitioned where id < ${idFloor('email_', first)}) as any`;
  if (below!.any) out.push({ suffix: '_before', low: null, high: idFloor('email_', first) });
  for (let day = first; day <= last; day += 86_400_000) {
    out.push({ suffix: `_p${new Date(day).toISOString().slice(0, 10).replaceAll('-', '')}`, low: idFloor('email_', day), high: idFloor('email_', day + 86_400_000) });
  }
  return out;
}

type ParentIndex = { table: Table; def: string; constraint: string | null };

/** The partitioned tables' indexes, as each partition must have them to be attached without a build. */
async function parentIndexes(sql: Sql): Promise<ParentIndex[]> {
  return sql<ParentIndex[]>`
    select p.relname as table, pg_get_indexdef(i.indexrelid) as def, pg_get_constraintdef(c.oid) as constraint
    from pg_index i join pg_class p on p.oid = i.indrelid
    left join pg_constraint c on c.conindid = i.indexrelid and c.conrelid = i.indrelid and c.contype in ('p', 'u')
    where p.relname in ${sql(TABLES)} and p.relnamespace = current_schema()::regnamespace`;
}

/**
 * A day's four tables in one transaction: each made like its parent, given a CHECK matching its
 * bounds (so ATTACH need not scan it), filled from the old table, indexed as its parent is (so
 * ATTACH adopts the indexes instead of building them), attached, and the CHECK dropped. Returns
 * false when the day was already attached.
 */
async function buildSlice(sql: Sql, slice: Slice, indexes: ParentIndex[]): Promise<boolean> {
  return sql.begin(async (tx) => {
    const [done] = await tx`
      select exists (select 1 from pg_inherits where inhrelid = to_regclass(${`emails${slice.suffix}`})) as attached`;
    if (done!.attached) return false;
    // One round trip a day: the statements are ours, the bounds are quoted literals.
    const statements: string[] = [];
    const low = slice.low === null ? null : literal(slice.low);
    const high = literal(slice.high);
    for (const table of TABLES) {
      const part = `${table}${slice.suffix}`;
      const key = KEY[table];
      statements.push(
        `drop table if exists ${part}`,
        `create table ${part} (like ${table} including all excluding indexes)`,
        `alter table ${part} add constraint ${part}_bounds check (${key} is not null${low ? ` and ${key} >= ${low}` : ''} and ${key} < ${high})`,
        FILL[table](part, low ?? "''", high),
        ...indexes.filter((i) => i.table === table).map((index) => (index.constraint
          ? `alter table ${part} add ${index.constraint}`
          : index.def.replace(/^CREATE (UNIQUE )?INDEX \S+ ON ONLY \S+ /, (_m, unique: string | undefined) => `CREATE ${unique ?? ''}INDEX ON ${part} `))),
        `alter table ${table} attach partition ${part} for values from (${low ?? 'minvalue'}) to (${high})`,
        `alter table ${part} drop constraint ${part}_bounds`,
      );
    }
    await tx.unsafe(statements.join(';\n'));
    return true;
  });
}

/** Fills a day's table from the old one: low <= key < high (low '' below every id). */
const FILL: Record<Table, (part: string, low: string, high: string) => string> = {
  emails: (part, low, high) => `insert into ${part} select * from emails_unpartitioned where id >= ${low} and id < ${high}`,
  events: (part, low, high) => `insert into ${part} select * from events_unpartitioned where email_id >= ${low} and email_id < ${high}`,
  webhook_deliveries: (part, low, high) => `insert into ${part} select d.*, e.email_id
    from webhook_deliveries_unpartitioned d join events_unpartitioned e on e.id = d.event_id
    where e.email_id >= ${low} and e.email_id < ${high}`,
  // Entries of emails that are gone (email_tags had no foreign key) are not carried over.
  email_tags: (part, low, high) => `insert into ${part} select * from email_tags_unpartitioned t
    where t.email_id >= ${low} and t.email_id < ${high}
      and exists (select 1 from emails_unpartitioned e where e.id = t.email_id and e.project_id = t.project_id)`,
};

/**
 * The old tables go once every row they held is in a partition. The days run without a gap from
 * the lowest id (`_before`, or the first day when nothing lies below it) to `end`, so a row no day
 * took lies at or beyond `end` (an id made by hand beyond next week): it stops the move with the
 * old tables kept, as 000022 would have failed. The check reads only the old tables, whose indexes
 * are few; counting the partitioned ones would lock every partition's indexes at once.
 */
async function dropOldTables(sql: Sql, end: string) {
  await sql.begin(async (tx) => {
    const [old] = await tx`select to_regclass('emails_unpartitioned') is not null as present`;
    if (!old!.present) return;
    const [beyond] = await tx<{ emails: boolean; events: boolean; deliveries: boolean; tags: boolean }[]>`
      select
        exists (select 1 from emails_unpartitioned where id >= ${end}) as emails,
        exists (select 1 from events_unpartitioned where email_id >= ${end}) as events,
        exists (select 1 from webhook_deliveries_unpartitioned d join events_unpartitioned e on e.id = d.event_id
                where e.email_id >= ${end}) as deliveries,
        exists (select 1 from email_tags_unpartitioned t where t.email_id >= ${end}
                and exists (select 1 from emails_unpartitioned e where e.id = t.email_id and e.project_id = t.project_id)) as tags`;
    const left = Object.entries(beyond!).filter(([, any]) => any).map(([name]) => name);
    if (left.length > 0) {
      throw new Error(`the move to time partitions found rows of ${left.join(', ')} beyond next week's partitions; `
        + 'the old tables are kept as <table>_unpartitioned');
    }
    // cascade: the ops views over them go too, and are made again after migrating.
    await tx`drop table webhook_deliveries_unpartitioned, events_unpartitioned, email_tags_unpartitioned, emails_unpartitioned cascade`;
  });
}

/** The migration that adds email_recipients, made and filled in one transaction like 000022's move. */
export const RECIPIENTS_MIGRATION = '000028.sql';

/**
 * 000028 makes email_recipients with a partition for each of emails' and fills it in one
 * transaction: about seven locks a day of history, which at 400 days holds most of the server's
 * lock table. When `emails` is partitioned and email_recipients is not there yet, it is made here
 * a day per transaction instead, and 000028 then finds it made.
 */
export async function recipientsMoveNeeded(sql: Sql | postgres.TransactionSql): Promise<boolean> {
  const [row] = await sql<{ ready: boolean }[]>`
    select (select relkind::text from pg_class where oid = to_regclass('emails')) = 'p'
       and (to_regclass('email_recipients') is null
            or exists (select 1 from pg_class where relname = 'email_recipients' and relkind = 'p'
                       and obj_description(oid, 'pg_class') = 'being filled')) as ready`;
  return row!.ready;
}

/** Makes and fills email_recipients as 000028 does, a day per transaction. Returns the days filled. */
export async function moveRecipientsInSteps(sql: Sql): Promise<number> {
  if (!(await recipientsMoveNeeded(sql))) return 0;
  await sql.begin(async (tx) => {
    if ((await tx`select to_regclass('email_recipients') is not null as made`)[0]!.made) return;
    // As 000028 defines it (it replaces it with the same).
    await tx.unsafe(`create or replace function mailroom_bare_address(recipient text) returns text
      language sql immutable parallel safe as $$
        select lower(btrim(coalesce(substring(recipient from '<([^<>]*)>\\s*$'), recipient)))
      $$`);
    await tx`create table email_recipients (
      project_id text not null,
      address text not null,
      email_id text not null
    ) partition by range (email_id)`;
    await tx`alter table email_recipients add primary key (project_id, address, email_id)`;
    // Marks the table unfinished, so a run interrupted goes on (000028 skips a table that exists).
    await tx`comment on table email_recipients is 'being filled'`;
  });
  const parts = await sql<{ suffix: string; bound: string }[]>`
    select substr(c.relname, length('emails') + 1) as suffix, pg_get_expr(c.relpartbound, c.oid) as bound
    from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent = 'emails'::regclass and not i.inhdetachpending order by c.relname`;
  let filled = 0;
  for (const { suffix, bound } of parts) {
    const part = `email_recipients${suffix}`;
    const done = await sql.begin(async (tx) => {
      const [attached] = await tx`select exists (select 1 from pg_inherits where inhrelid = to_regclass(${part})) as yes`;
      if (attached!.yes) return false;
      // Built apart and attached with its index, as a day of 000022's move is (the attach scans
      // the day's rows to check its bounds; they are few).
      await tx.unsafe(`
        drop table if exists ${part};
        create table ${part} (like email_recipients including all excluding indexes);
        insert into ${part} (project_id, address, email_id)
          select distinct e.project_id, mailroom_bare_address(a), e.id
          from emails${suffix} e cross join lateral unnest(e.to_addresses || e.cc_addresses || e.bcc_addresses) a;
        alter table ${part} add primary key (project_id, address, email_id);
        alter table email_recipients attach partition ${part} ${bound}`);
      return true;
    });
    if (done) filled++;
  }
  await sql`comment on table email_recipients is null`;
  await sql.unsafe('analyze email_recipients');
  return filled;
}

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
/** The smallest id of `prefix` made at or after `ms`, as mailroom_id_floor spells it. */
export function idFloor(prefix: string, ms: number): string {
  let time = '';
  for (let i = 9, t = ms; i >= 0; i--) {
    time = CROCKFORD[t % 32]! + time;
    t = Math.floor(t / 32);
  }
  return `${prefix}${time}0000000000000000`;
}

function literal(value: string) {
  return `'${value.replaceAll("'", "''")}'`;
}
