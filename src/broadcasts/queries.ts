import { idFloor } from '../platform/ids.ts';
import type { Sql, TxSql } from '../platform/db.ts';

export type BroadcastStatus = 'draft' | 'scheduled' | 'sending' | 'sent' | 'canceled';

export type BroadcastContent = {
  name: string;
  segmentId: string;
  topicId: string | null;
  fromAddress: string;
  replyToAddresses: string[];
  subject: string;
  previewText: string | null;
  html: string | null;
  text: string | null;
  templateId: string | null;
  templateVersion: number | null;
};

/** A broadcast as stored: its content, and where its send stands. */
export type BroadcastRow = BroadcastContent & {
  id: string;
  projectId: string;
  status: BroadcastStatus;
  scheduledAt: Date | null;
  snapshotAt: Date | null;
  sentAt: Date | null;
  pagedAt: Date | null;
  canceledFrom: 'scheduled' | 'sending' | null;
  cursor: string | null;
  recipients: number;
  suppressed: number;
  /** The counts retention kept when it began removing the broadcast's emails; null before. */
  countsKept: BroadcastCounts | null;
  createdAt: Date;
};

const COLUMNS = (sql: Sql | TxSql) => sql`id, project_id, name, segment_id, topic_id, from_address, reply_to_addresses, subject,
  preview_text, html, text, template_id, template_version, status, scheduled_at, snapshot_at, sent_at, paged_at, canceled_from,
  cursor, recipients, suppressed, counts_kept, created_at`;

const asRow = (c: BroadcastContent) => ({
  name: c.name, segment_id: c.segmentId, topic_id: c.topicId, from_address: c.fromAddress,
  reply_to_addresses: c.replyToAddresses, subject: c.subject, preview_text: c.previewText, html: c.html, text: c.text,
  template_id: c.templateId, template_version: c.templateVersion,
});

export async function insertBroadcast(sql: Sql | TxSql, id: string, projectId: string, content: BroadcastContent) {
  const [row] = await sql<[BroadcastRow]>`
    insert into broadcasts ${sql({ id, project_id: projectId, ...asRow(content) })}
    returning ${COLUMNS(sql)}`;
  return row;
}

/**
 * `lock` takes the row as an update of its non-key columns does (FOR NO KEY UPDATE): it keeps
 * out another page writer or a cancel, but not the key-share lock of a counter row's foreign-key
 * check (a new row's, or one its transaction already updated). FOR UPDATE held every send that
 * recorded two copies in one transaction for the whole of a page's making, about 0.1 s a page.
 */
export async function getBroadcast(sql: Sql | TxSql, projectId: string, id: string, lock = false) {
  const [row] = await sql<[BroadcastRow?]>`
    select ${COLUMNS(sql)} from broadcasts where id = ${id} and project_id = ${projectId} ${lock ? sql`for no key update` : sql``}`;
  return row;
}

/**
 * Up to `batch` finished broadcasts (`sent`, or `canceled`) that began before `before` and whose
 * counts are not kept yet, oldest first, across projects: retention's work, each then kept under
 * its own project.
 */
export async function broadcastsToKeep(sql: Sql, before: Date, batch: number) {
  return sql<BroadcastRow[]>`
    select ${COLUMNS(sql)} from broadcasts
    where status in ('sent', 'canceled') and counts_kept is null and snapshot_at < ${before}
    order by snapshot_at limit ${batch}`;
}

export async function listBroadcasts(sql: Sql, projectId: string, opts: { limit: number; startingAfter?: string; endingBefore?: string }) {
  const rows = opts.endingBefore
    ? (await sql<BroadcastRow[]>`
        select ${COLUMNS(sql)} from broadcasts where project_id = ${projectId} and id > ${opts.endingBefore}
        order by id asc limit ${opts.limit + 1}`)
    : await sql<BroadcastRow[]>`
        select ${COLUMNS(sql)} from broadcasts where project_id = ${projectId}
          ${opts.startingAfter ? sql`and id < ${opts.startingAfter}` : sql``}
        order by id desc limit ${opts.limit + 1}`;
  const page = rows.slice(0, opts.limit);
  return { rows: opts.endingBefore ? page.reverse() : page, hasMore: rows.length > opts.limit };
}

/** The content of a draft or scheduled broadcast; undefined when it is in neither. */
export async function updateBroadcast(sql: Sql | TxSql, projectId: string, id: string, content: BroadcastContent) {
  const [row] = await sql<[BroadcastRow?]>`
    update broadcasts set ${sql(asRow(content))}, updated_at = now()
    where id = ${id} and project_id = ${projectId} and status in ('draft', 'scheduled')
    returning ${COLUMNS(sql)}`;
  return row;
}

/** Removes a draft or scheduled broadcast and its waiting job; undefined when it is in neither. */
export async function deleteBroadcast(tx: TxSql, projectId: string, id: string) {
  const [row] = await tx<[{ id: string }?]>`
    delete from broadcasts where id = ${id} and project_id = ${projectId} and status in ('draft', 'scheduled') returning id`;
  if (row) await tx`select graphile_worker.remove_job(${sendJobKey(id)})`;
  return row;
}

/** One job per broadcast: a re-enqueue replaces the waiting one. */
export const sendJobKey = (broadcastId: string) => `broadcast__send:${broadcastId}`;

/**
 * Below a broadcast's emails and above nothing else: the next page is made only when a worker
 * slot is free of transactional mail, yet before the page's own emails.
 */
export const BROADCAST_TASK_PRIORITY = 5;

export function broadcastJob(sql: Sql | TxSql, broadcastId: string, projectId: string, runAt: ReturnType<Sql>) {
  return sql`graphile_worker.add_job('broadcast__send',
    json_build_object('broadcast_id', ${broadcastId}::text, 'project_id', ${projectId}::text),
    run_at := ${runAt}, max_attempts := 25, job_key := ${sendJobKey(broadcastId)}, priority := ${BROADCAST_TASK_PRIORITY}::int)`;
}

/**
 * `send`: a draft (or a scheduled one sent again) becomes `sending` now, its recipients fixed as
 * of this moment, or `scheduled` for `at`, with its job in the same transaction. The job's time
 * is the row's, on the database's clock (§16.9). Undefined when it is not draft or scheduled.
 */
export async function startBroadcast(tx: TxSql, projectId: string, id: string, at: Date | null) {
  const [row] = await tx<[BroadcastRow?]>`
    update broadcasts set
      status = case when ${at}::timestamptz > now() then 'scheduled' else 'sending' end,
      scheduled_at = case when ${at}::timestamptz > now() then ${at}::timestamptz end,
      snapshot_at = case when ${at}::timestamptz > now() then null else now() end,
      cursor = null, paged_at = null, canceled_from = null, updated_at = now()
    where id = ${id} and project_id = ${projectId} and status in ('draft', 'scheduled')
    returning ${COLUMNS(tx)}`;
  if (!row) return undefined;
  await tx`select ${broadcastJob(tx, id, projectId, tx`coalesce(${row.scheduledAt}::timestamptz, now())`)}`;
  return row;
}

/**
 * `cancel`: a scheduled broadcast goes back to draft; a sending one stops, and its emails not yet
 * claimed are canceled (bounded: only a window of them is ever queued). Undefined otherwise.
 */
export async function cancelBroadcast(tx: TxSql, projectId: string, id: string) {
  const [row] = await tx<[BroadcastRow?]>`
    update broadcasts set
      status = case when status = 'scheduled' then 'draft' else 'canceled' end,
      canceled_from = status, scheduled_at = null, updated_at = now()
    where id = ${id} and project_id = ${projectId} and status in ('scheduled', 'sending')
    returning ${COLUMNS(tx)}`;
  if (!row) return undefined;
  await tx`select graphile_worker.remove_job(${sendJobKey(id)})`;
  if (row.status === 'canceled') {
    // Their waiting jobs (keyed by email id) go with them, so another broadcast's copies do not
    // queue behind up to BROADCAST_MAX_AHEAD jobs with nothing to send. A job a worker holds
    // stays, and finds its email canceled.
    await tx`
      with canceled as (
        update emails set status = 'canceled', updated_at = now()
        where broadcast_id = ${id} and project_id = ${projectId} and status = 'queued'
        returning id)
      select count(*) from graphile_worker.complete_jobs(array(
        select j.id from graphile_worker._private_jobs j join canceled c on j.key = c.id where j.locked_at is null))`;
  }
  return row;
}

/** A scheduled broadcast that fell due: `sending`, with its recipients fixed as of now. */
export async function beginDue(tx: TxSql, projectId: string, id: string) {
  await tx`update broadcasts set status = 'sending', snapshot_at = now(), updated_at = now()
    where id = ${id} and project_id = ${projectId} and status = 'scheduled' and scheduled_at <= now() + interval '1 second'`;
}

/**
 * A broadcast's emails not yet settled, counted up to `cap`: how far it runs ahead of its sends.
 * Read by the partial index of unsent broadcast mail, which holds only that window.
 */
export async function unsentCount(sql: Sql, projectId: string, id: string, cap: number): Promise<number> {
  const [row] = await sql<[{ n: number }]>`
    select count(*)::int as n from (select 1 from emails
      where broadcast_id = ${id} and project_id = ${projectId} and status in ('queued', 'sending') limit ${cap}) w`;
  return row.n;
}

export type PageContact = {
  id: string;
  email: string;
  firstName: string | null;
  lastName: string | null;
  properties: Record<string, string | number>;
  /** Whether the contact receives it now: not unsubscribed, and the topic's rule lets it. */
  receives: boolean;
};

/**
 * The next `size` members of the segment after `cursor` that were members at the snapshot, in
 * contact id order (the segment's primary key), each with whether it receives the broadcast now.
 * The cursor moves past every member read, so a page costs the same however many are filtered.
 */
export async function nextPage(tx: TxSql, b: BroadcastRow, size: number): Promise<PageContact[]> {
  return tx<PageContact[]>`
    select c.id, c.email, c.first_name, c.last_name, c.properties,
      not c.unsubscribed ${b.topicId ? tx`and coalesce(ct.subscription, t.default_subscription) = 'opt_in'` : tx``} as receives
    from (select contact_id from contact_segments
          where segment_id = ${b.segmentId} and project_id = ${b.projectId} and created_at <= ${b.snapshotAt}
            ${b.cursor ? tx`and contact_id > ${b.cursor}` : tx``}
          order by contact_id limit ${size}) m
    join contacts c on c.id = m.contact_id and c.project_id = ${b.projectId}
    ${b.topicId ? tx`left join topics t on t.id = ${b.topicId} and t.project_id = ${b.projectId}
      left join contact_topics ct on ct.contact_id = c.id and ct.topic_id = ${b.topicId}` : tx``}
    order by c.id`;
}

export async function insertRecipients(tx: TxSql, rows: { broadcastId: string; contactId: string; projectId: string; email: string; emailId: string | null; skipped: string | null }[]) {
  if (rows.length === 0) return;
  await tx`
    insert into broadcast_recipients (broadcast_id, contact_id, project_id, email, email_id, skipped)
    select * from jsonb_to_recordset(${tx.json(rows.map((r) => ({ b: r.broadcastId, c: r.contactId, p: r.projectId, e: r.email, m: r.emailId, s: r.skipped })))})
      as r(b text, c text, p text, e text, m text, s text)
    on conflict do nothing`;
}

/**
 * The page's cursor and tallies, and `paged_at` once the segment is read to its end; the page's new
 * emails (queued) and its copies over the message limit (too_large) go on the broadcast's counters.
 */
export async function advance(tx: TxSql, b: BroadcastRow, cursor: string | null, page: { queued: number; tooLarge: number; suppressed: number }, done: boolean) {
  await tx`
    with counted as (
      insert into broadcast_counts as c (broadcast_id, project_id, metric, shard, n)
      select ${b.id}, ${b.projectId}, d.metric, pg_backend_pid(), d.n
      from (values ('queued', ${page.queued}::int), ('too_large', ${page.tooLarge}::int)) d(metric, n)
      where d.n > 0
      on conflict (broadcast_id, metric, shard) do update set n = c.n + excluded.n)
    update broadcasts set cursor = ${cursor}, recipients = recipients + ${page.queued + page.tooLarge},
      suppressed = suppressed + ${page.suppressed}, paged_at = ${done ? tx`now()` : tx`null`}, updated_at = now()
    where id = ${b.id} and project_id = ${b.projectId}`;
}

export async function markBroadcastSent(sql: Sql, projectId: string, id: string) {
  await sql`update broadcasts set status = 'sent', sent_at = now(), updated_at = now()
    where id = ${id} and project_id = ${projectId} and status = 'sending'`;
}

/** A copy as a new draft. */
export async function duplicateBroadcast(sql: Sql | TxSql, projectId: string, id: string, newId: string) {
  const [row] = await sql<[BroadcastRow?]>`
    insert into broadcasts (id, project_id, name, segment_id, topic_id, from_address, reply_to_addresses, subject, preview_text,
      html, text, template_id, template_version)
    select ${newId}, project_id, name, segment_id, topic_id, from_address, reply_to_addresses, subject, preview_text,
      html, text, template_id, template_version
    from broadcasts where id = ${id} and project_id = ${projectId}
    returning ${COLUMNS(sql)}`;
  return row;
}

export type BroadcastCounts = Record<'recipients' | 'suppressed' | 'queued' | 'sent' | 'delivered' | 'opened' | 'clicked' | 'bounced' | 'complained' | 'unsubscribed' | 'failed', number>;

/**
 * The counts: the emails' states and the copies over the message limit from the broadcast's
 * counters (broadcast_counts, a row per metric and connection, kept as its emails change, so the
 * read costs the same at any size); bounces and complaints from the project's events of those two
 * kinds about emails made since the broadcast began (events are partitioned by email id, so only
 * those days are read), matched to its emails; the recipients who left, from the few who did;
 * recipients and suppressed, the tallies the pages keep. `failed` also holds the recipients whose
 * personalised copy was over the message limit, for whom no email was made. Once retention has
 * kept them on the row (its emails are going), those.
 */
export async function broadcastCounts(sql: Sql, b: BroadcastRow): Promise<BroadcastCounts> {
  if (b.countsKept) return b.countsKept;
  const rated = b.snapshotAt
    ? sql`select count(distinct ev.email_id) filter (where ev.type = 'email.bounced')::int as bounced,
        count(distinct ev.email_id) filter (where ev.type = 'email.complained')::int as complained
      from events ev join emails e on e.id = ev.email_id and e.project_id = ev.project_id
      where ev.project_id = ${b.projectId} and ev.email_id >= ${idFloor('email', b.snapshotAt.getTime() - 60_000)}
        and ev.type in ('email.bounced', 'email.complained') and e.broadcast_id = ${b.id}`
    : sql`select 0 as bounced, 0 as complained`;
  const [row] = await sql<[Omit<BroadcastCounts, 'recipients' | 'suppressed'> & { tooLarge: number }]>`
    select states.*, rated.*,
      (select count(*)::int from broadcast_recipients r
       where r.broadcast_id = ${b.id} and r.project_id = ${b.projectId} and r.email_id is not null
         and r.contact_id in (${leftContacts(sql, b)})) as unsubscribed
    from (
      select coalesce(sum(n) filter (where metric = 'queued'), 0)::int as queued,
        coalesce(sum(n) filter (where metric = 'sent'), 0)::int as sent,
        coalesce(sum(n) filter (where metric = 'delivered'), 0)::int as delivered,
        coalesce(sum(n) filter (where metric = 'opened'), 0)::int as opened,
        coalesce(sum(n) filter (where metric = 'clicked'), 0)::int as clicked,
        coalesce(sum(n) filter (where metric = 'failed'), 0)::int as failed,
        coalesce(sum(n) filter (where metric = 'too_large'), 0)::int as too_large
      from broadcast_counts where broadcast_id = ${b.id} and project_id = ${b.projectId}) states
    cross join (${rated}) rated`;
  const { tooLarge, ...counts } = row;
  return { recipients: b.recipients, suppressed: b.suppressed, ...counts, failed: counts.failed + tooLarge };
}

export const RECIPIENT_TYPES = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained', 'unsubscribed', 'suppressed', 'failed'] as const;
export type RecipientType = (typeof RECIPIENT_TYPES)[number];

export type RecipientRow = { contactId: string; email: string; emailId: string | null };

/**
 * The contacts who have left the broadcast: `unsubscribed`, or opted out of its topic. Read from
 * the partial index of unsubscribed contacts and the topic's index, so it costs what they number,
 * not what the broadcast does.
 */
function leftContacts(sql: Sql, b: BroadcastRow, after?: string) {
  return sql`select id from contacts where project_id = ${b.projectId} and unsubscribed ${after ? sql`and id > ${after}` : sql``}
    ${b.topicId ? sql`union select contact_id from contact_topics
      where topic_id = ${b.topicId} and subscription = 'opt_out' and project_id = ${b.projectId} ${after ? sql`and contact_id > ${after}` : sql``}` : sql``}`;
}

/**
 * The broadcast's emails with an event of `type`: the project's events of that kind since the
 * broadcast began, from the partial index of bounces and complaints (events are partitioned by
 * email id, so only those days are read).
 */
function emailsWith(sql: Sql, b: BroadcastRow, type: 'email.bounced' | 'email.complained') {
  return sql`select distinct ev.email_id from events ev where ev.project_id = ${b.projectId} and ev.type = ${type}
    and ev.email_id >= ${idFloor('email', (b.snapshotAt ?? b.createdAt).getTime() - 60_000)}`;
}

/**
 * A page of the broadcast's recipients of one kind, in contact id order. The rare outcomes
 * (bounced, complained, unsubscribed) are found from their own indexes and then matched to the
 * recipients, so a million-recipient broadcast with a few bounces reads those few; the common
 * ones walk the recipients in order and stop at the page's end.
 */
export async function listRecipients(sql: Sql, b: BroadcastRow, type: RecipientType, opts: { limit: number; startingAfter?: string }) {
  const rows = await recipientsPage(sql, b, type, opts);
  return { rows: rows.slice(0, opts.limit), hasMore: rows.length > opts.limit };
}

/** The statement of listRecipients: up to `limit + 1` rows, so a caller knows whether more follow. */
export function recipientsPage(sql: Sql, b: BroadcastRow, type: RecipientType, opts: { limit: number; startingAfter?: string }) {
  const after = opts.startingAfter;
  const n = opts.limit + 1;
  if (type === 'bounced' || type === 'complained' || type === 'unsubscribed') {
    // Driven from the outcome's rows, each matched to a recipient by one probe. The lateral
    // subquery (kept apart by `offset 0`) leaves the planner no other way: under the limit it would
    // rather walk every recipient in contact order, supposing the project's bounces (say) spread
    // evenly over this broadcast's recipients, and read them all when they are not. Unsubscribed
    // contacts come in id order from their partial index, so a page stops once it is full.
    const [rows, match] = type === 'unsubscribed'
      ? [leftContacts(sql, b, after), sql`r.contact_id = x.id and r.email_id is not null`]
      : [emailsWith(sql, b, `email.${type}`), sql`r.email_id = x.email_id ${after ? sql`and r.contact_id > ${after}` : sql``}`];
    return sql<RecipientRow[]>`
      select r.contact_id, r.email, r.email_id from (${rows}) x
      cross join lateral (select r.contact_id, r.email, r.email_id from broadcast_recipients r
        where r.broadcast_id = ${b.id} and r.project_id = ${b.projectId} and ${match} offset 0) r
      order by ${type === 'unsubscribed' ? sql`x.id` : sql`r.contact_id`} limit ${n}`;
  }
  const filter = {
    suppressed: sql`r.skipped = 'suppressed'`,
    sent: sql`e.status = 'sent'`,
    delivered: sql`e.delivered_at is not null`,
    opened: sql`e.opened_at is not null`,
    clicked: sql`e.clicked_at is not null`,
    failed: sql`(e.status = 'failed' or r.skipped = 'too_large')`,
  }[type];
  return sql<RecipientRow[]>`
    select r.contact_id, r.email, r.email_id from broadcast_recipients r
    ${type === 'suppressed' ? sql`` : type === 'failed'
      // A copy over the message limit was never made: its recipient has no email.
      ? sql`left join emails e on e.id = r.email_id and e.project_id = r.project_id`
      : sql`join emails e on e.id = r.email_id and e.project_id = r.project_id`}
    where r.broadcast_id = ${b.id} and r.project_id = ${b.projectId} and ${filter}
      ${after ? sql`and r.contact_id > ${after}` : sql``}
    order by r.contact_id limit ${n}`;
}

/** The links clicked in the broadcast's emails, with all and unique clicks. */
export async function clickedLinks(sql: Sql, b: BroadcastRow) {
  return sql<{ url: string; clicks: number; uniqueClicks: number }[]>`
    select ev.data->>'link' as url, count(*)::int as clicks, count(distinct ev.email_id)::int as unique_clicks
    from emails e join events ev on ev.email_id = e.id and ev.project_id = e.project_id and ev.type = 'email.clicked'
    where e.broadcast_id = ${b.id} and e.project_id = ${b.projectId} and ev.data->>'link' is not null
    group by 1 order by clicks desc, url limit 1000`;
}
