import type { PendingQuery, Row } from 'postgres';
import type { ReservedSql, Sql, TxSql } from '../platform/db.ts';
import type { EmailRow, EmailStatus, EmailWithBodies } from './schemas.ts';
import type { EmailContent } from './compose.ts';
import { recordEventsStatement, type EmailEvent } from '../events/record.ts';
import { commitShared } from '../platform/shared-commit.ts';
import type { DomainTracking } from '../interfaces.ts';
import { decodeTime } from 'ulid';
import { ID_PREFIX, idClockNow, idFloor } from '../platform/ids.ts';
import { inEmailsDay, type EmailsTable } from './day-table.ts';

/** The columns every read of an email shows; the bodies are added only where one email is read. */
const EMAIL_COLUMNS = (sql: Sql) => sql`id, status, from_address, to_addresses, cc_addresses, reply_to_addresses, subject,
  headers, provider_message_id, sent_at, delivered_at, last_error, scheduled_at, tags, opened_at, clicked_at, source, created_at, template_id, template_version`;

export async function getEmail(sql: Sql, projectId: string, emailId: string): Promise<EmailWithBodies | undefined> {
  // A relayed email's bodies were read from its message once, as it was accepted: no read parses it.
  const [row] = await sql<[EmailWithBodies?]>`
    select ${EMAIL_COLUMNS(sql)}, html, text, body_purged from emails where id = ${emailId} and project_id = ${projectId}`;
  return row;
}

export async function emailExists(sql: Sql, projectId: string, emailId: string): Promise<boolean> {
  const [row] = await sql`select 1 from emails where id = ${emailId} and project_id = ${projectId}`;
  return row !== undefined;
}

/** How long a client's Message-ID names its first email: a repeat within it is a retry. */
export const SUBMITTED_MESSAGE_ID_TTL = '24 hours';

/**
 * The email a client's Message-ID names in this project, and whether that is within the dedupe
 * window. submitted_message_ids holds the Message-IDs of the window (its primary key is what makes
 * concurrent repeats yield one email); retention prunes it.
 */
export async function findSubmitted(sql: Sql, projectId: string, clientMessageId: string) {
  const [row] = await sql<[{ id: string; live: boolean }?]>`
    select email_id as id, created_at > now() - ${SUBMITTED_MESSAGE_ID_TTL}::interval as live from submitted_message_ids
    where project_id = ${projectId} and message_id = ${clientMessageId}`;
  return row;
}

/** Frees a Message-ID whose window has passed, so a new submission may take it. */
export async function releaseSubmittedMessageId(sql: Sql, projectId: string, clientMessageId: string) {
  await sql`
    delete from submitted_message_ids
    where project_id = ${projectId} and message_id = ${clientMessageId} and created_at <= now() - ${SUBMITTED_MESSAGE_ID_TTL}::interval`;
}

/**
 * How many rows a page's statement fetches, as a constant of its text: the default page and a full
 * one. Over tables partitioned by day, a LIMIT parameter makes PostgreSQL plan the statement anew on
 * every call (every partition considered, about 10 ms at 130 days), while with a constant it keeps
 * one generic plan after a few calls and runs it in under a millisecond.
 */
const pageFetch = (sql: Sql, limit: number) => sql.unsafe(limit < 26 ? '26' : '101');

/**
 * Newest first; fetches at least one extra row to answer has_more without a count. A tag filter
 * walks the tag's entries in email_tags in page order, so a rare tag reads the page's rows, not
 * the project; a recipient filter (`to`: a bare, lower-cased address) walks email_recipients the
 * same way, any tag then checked per email. The page is read window by window back in time
 * (pageWindows); a recipient's, day by day over the days it was sent to (recipientWindows).
 * `sql` should keep generic plans (AppDeps.historySql): each window's bounds are literals.
 */
export async function listEmails(
  sql: Sql,
  projectId: string,
  opts: { limit: number; startingAfter?: string; status?: EmailStatus; tag?: { name: string; value: string }; to?: string; broadcastId?: string },
) {
  const fetch = opts.limit + 1;
  // A broadcast's emails are listed only when asked for by their broadcast (§23.6).
  const ofBroadcast = (column: ReturnType<Sql>) => (opts.broadcastId ? sql`and ${column} = ${opts.broadcastId}` : sql`and ${column} is null`);
  const rows: EmailRow[] = [];
  const readWindow = (db: Sql | ReservedSql, window: PageWindow) => {
    const range = (column: ReturnType<Sql>) => sql`
      ${window.low === null ? sql`` : sql`and ${column} >= ${sql.unsafe(`'${window.low}'`)}`}
      ${window.high === null ? sql`` : sql`and ${column} < ${sql.unsafe(`'${window.high}'`)}`}`;
    // An entry's email (`entry` names email_recipients or email_tags), filtered as the page is.
    const emailOf = (entry: ReturnType<Sql>) => sql`
      cross join lateral (
        select ${EMAIL_COLUMNS(sql)} from emails
        where emails.id = ${entry}.email_id and emails.project_id = ${entry}.project_id ${range(sql`emails.id`)}
          ${opts.status ? sql`and emails.status = ${opts.status}` : sql``}
          ${ofBroadcast(sql`emails.broadcast_id`)}
        limit 1) e`;
    return opts.to
      // Each entry's email is a lateral lookup by id (the limit keeps it one), so PostgreSQL walks
      // the address's entries newest first and reads only the page's emails; as a join it merged
      // the entries with the project's whole email history in id order (134 ms at 1 million).
      ? db<EmailRow[]>`
        select e.*
        from email_recipients r
        ${emailOf(sql`r`)}
        where r.project_id = ${projectId} and r.address = ${opts.to}
          ${range(sql`r.email_id`)}
          ${opts.tag ? sql`and exists (select 1 from email_tags t where t.project_id = r.project_id and t.name = ${opts.tag.name}
            and t.value = ${opts.tag.value} and t.email_id = r.email_id ${range(sql`t.email_id`)})` : sql``}
          ${opts.startingAfter ? sql`and r.email_id < ${opts.startingAfter}` : sql``}
        order by r.email_id desc
        limit ${pageFetch(sql, opts.limit)}`
      : opts.tag
      // The same for a tag's entries: as a join, the plan kept for any tag merged the entries with
      // the project's emails of the window, every one of them read for a rare tag.
      ? db<EmailRow[]>`
        select e.*
        from email_tags t
        ${emailOf(sql`t`)}
        where t.project_id = ${projectId} and t.name = ${opts.tag.name} and t.value = ${opts.tag.value}
          ${range(sql`t.email_id`)}
          ${opts.startingAfter ? sql`and t.email_id < ${opts.startingAfter}` : sql``}
        order by t.email_id desc
        limit ${pageFetch(sql, opts.limit)}`
      : db<EmailRow[]>`
        select ${EMAIL_COLUMNS(sql)}
        from emails
        where project_id = ${projectId} ${range(sql`id`)}
          ${opts.status ? sql`and status = ${opts.status}` : sql``}
          ${ofBroadcast(sql`broadcast_id`)}
          ${opts.startingAfter ? sql`and id < ${opts.startingAfter}` : sql``}
        order by id desc
        limit ${pageFetch(sql, opts.limit)}`;
  };
  const windows = (opts.to ? await recipientWindows(sql, projectId, opts.to) : pageWindows(idClockNow()))
    .filter((window) => !(opts.startingAfter && window.low !== null && window.low >= opts.startingAfter));
  if (!windows.length) return page(rows, opts.limit);
  // Windows the project wrote little in are read as one (mergeQuiet): a small project's page is
  // one statement whatever its filter, as a busy project's page is when its newest window fills it.
  const planned = opts.to ? windows : mergeQuiet(windows, await projectVolumes(sql, projectId));
  // The first two one at a time: most pages end in them. A page read further has a filter few
  // emails match: the rest go out together, pipelined on one connection, so it costs the
  // database's time for each but one round trip for all.
  for (const window of planned.slice(0, 2)) {
    rows.push(...await readWindow(sql, window));
    if (rows.length >= fetch) return page(rows, opts.limit);
  }
  const rest = planned.slice(2);
  if (rest.length) {
    const connection = await sql.reserve();
    try {
      for (const found of await Promise.all(rest.map((window) => readWindow(connection, window)))) {
        rows.push(...found);
        if (rows.length >= fetch) break;
      }
    } finally {
      connection.release();
    }
  }
  return page(rows, opts.limit);
}

const page = (rows: EmailRow[], limit: number) => ({ rows: rows.slice(0, limit), hasMore: rows.length > limit });

type PageWindow = { low: string | null; high: string | null };

/** Where a page's windows end, in whole UTC days back from today: each twice the one before. */
const WINDOW_DAYS = [1, 3, 7, 15, 31, 63];

/**
 * The id ranges a page reads, newest first: [yesterday, ∞), then back to 3, 7, 15, 31 and 63 days
 * ago, then everything older. A page stops at the first windows that fill it, so it plans and
 * reads only the day partitions of those, however many days are kept: a window's bounds are
 * literals of its statement (whole UTC days, so each statement's text holds for a day and its
 * plan is kept), which PostgreSQL prunes partitions by while planning; a parameter it prunes by
 * only after planning every partition (about 0.2 ms each for a tag's join).
 */
function pageWindows(now: number): PageWindow[] {
  const today = Math.floor(now / 86_400_000) * 86_400_000;
  // Made of the prefix and Crockford base32 only: safe as literals.
  const bounds = WINDOW_DAYS.map((days) => idFloor('email', today - days * 86_400_000));
  return [...bounds, null].map((low, i) => ({ low, high: i === 0 ? null : bounds[i - 1]! }));
}

type DayVolume = { day: string; events: number };

/** A project's events per day, as a list read them, are kept this long: they only shape its windows. */
const VOLUMES_KEPT_MS = 60_000;
const VOLUMES_PROJECTS = 1_000;
const volumes = new Map<string, { at: number; days: Promise<DayVolume[]> }>();

/** The project's events per day (project_daily_counts), read at most once a minute. */
function projectVolumes(sql: Sql, projectId: string): Promise<DayVolume[]> {
  const now = Date.now();
  const kept = volumes.get(projectId);
  if (kept && now - kept.at < VOLUMES_KEPT_MS) return kept.days;
  const days = (async () => [...await sql<DayVolume[]>`
    select to_char(day, 'YYYY-MM-DD') as day, sum(n)::float8 as events from project_daily_counts
    where project_id = ${projectId}
    group by day`])();
  // A failed read is not kept; the page that asked sees its error.
  days.catch(() => { if (volumes.get(projectId)?.days === days) volumes.delete(projectId); });
  volumes.delete(projectId);
  volumes.set(projectId, { at: now, days });
  if (volumes.size > VOLUMES_PROJECTS) volumes.delete(volumes.keys().next().value!);
  return days;
}

/** Consecutive windows holding fewer of the project's events than this together are read as one. */
const QUIET_EVENTS = 5_000;
/** A newest window holding this many events (about 80 emails) likely fills a page alone, over its few partitions. */
const FILLING_EVENTS = 200;

/**
 * A page's windows, consecutive ones merged while the project's events in them
 * (project_daily_counts, a few per email) stay under QUIET_EVENTS together. A window exists to
 * keep a statement's partitions few where they hold many rows; over days a project wrote little in,
 * one statement costs less than a round trip each. A busy project's windows are left as they are,
 * and so is a newest window likely to fill the page by itself (FILLING_EVENTS): read alone, it
 * plans a few partitions rather than every one kept.
 */
function mergeQuiet(windows: PageWindow[], days: DayVolume[]): PageWindow[] {
  const volume = (w: PageWindow) => {
    const low = w.low === null ? -Infinity : decodeTime(w.low.slice(ID_PREFIX.email.length));
    const high = w.high === null ? Infinity : decodeTime(w.high.slice(ID_PREFIX.email.length));
    let events = 0;
    for (const d of days) {
      const at = Date.parse(`${d.day}T00:00:00Z`);
      if (at >= low && at < high) events += d.events;
    }
    return events;
  };
  const merged: PageWindow[] = [];
  let open: { window: PageWindow; events: number } | undefined;
  for (const [i, window] of windows.entries()) {
    const events = volume(window);
    if (i === 0 && events >= FILLING_EVENTS && windows.length > 1) {
      merged.push(window);
    } else if (open && open.events + events < QUIET_EVENTS) {
      open.window = { low: window.low, high: open.window.high };
      open.events += events;
    } else {
      if (open) merged.push(open.window);
      open = { window, events };
    }
  }
  if (open) merged.push(open.window);
  return merged;
}

/**
 * The id ranges a recipient's page reads, newest first: one for each day the project sent to the
 * address (recipient_days), so an address costs the days it was sent to, never a look into each
 * day kept, and an address on no email costs one lookup. The day '-infinity' (a migrated
 * database's `_before` partition) reads everything older than the oldest day listed.
 */
async function recipientWindows(tx: Sql | TxSql, projectId: string, address: string): Promise<Array<{ low: string | null; high: string | null }>> {
  const days = await tx<{ day: string }[]>`
    select case when day = '-infinity' then null else to_char(day, 'YYYY-MM-DD') end as day
    from recipient_days where project_id = ${projectId} and address = ${address}
    order by day desc`;
  const windows: Array<{ low: string | null; high: string | null }> = [];
  for (const { day } of days) {
    if (day === null) {
      windows.push({ low: null, high: windows.at(-1)?.low ?? null });
    } else {
      const start = Date.parse(`${day}T00:00:00Z`);
      windows.push({ low: idFloor('email', start), high: idFloor('email', start + 86_400_000) });
    }
  }
  return windows;
}

/** A new email; with `scheduledAt` in the future it waits as `scheduled`, else it is `queued`. */
export type NewEmail = EmailContent & {
  id: string;
  projectId: string;
  scheduledAt?: Date | null;
  tags?: { name: string; value: string }[];
  /** The send's own tracking switches; null leaves it to the sender's domain. */
  trackOpens?: boolean | null;
  trackClicks?: boolean | null;
  /** The template version it was rendered from, if any. */
  template?: { id: string; version: number } | null;
  /** Mail submitted over SMTP: the message as submitted, sent as it is instead of composed. */
  submitted?: SubmittedMessage;
  /** The broadcast it is one recipient's copy of: its job then waits behind transactional mail. */
  broadcastId?: string | null;
  /** The topic it is sent under: opted-out contacts are skipped at send, and its unsubscribe names the topic. */
  topicId?: string | null;
};

/**
 * Who goes first, written once: graphile-worker claims ready jobs by `priority` (lower first), so a
 * broadcast's emails wait while any other email of any project is ready to go (§23.6).
 */
export const BROADCAST_SEND_PRIORITY = 10;
export const sendPriority = (broadcastId: string | null | undefined) => (broadcastId ? BROADCAST_SEND_PRIORITY : 0);
/** The same rule in SQL, for a job made from the email's row (`broadcast_id` of the row read). */
export const sendPriorityOfRow = (sql: Sql | TxSql) => sql`case when broadcast_id is null then 0 else ${BROADCAST_SEND_PRIORITY}::int end`;

/** What an SMTP submission adds to its email. */
export type SubmittedMessage = {
  raw: Buffer;
  /**
   * The message's own Message-ID, also the key of the 24-hour retry dedupe. Absent when it has
   * none: the send adds one made from the email's id, as for API mail.
   */
  messageId?: string;
};

/** An attachment as the `attachments` column holds it. */
export type StoredAttachment = { filename: string; content_type?: string; content: string; content_id?: string };

function storedAttachments(list: EmailContent['attachments']): StoredAttachment[] {
  return list.map((a) => ({ filename: a.filename, content_type: a.contentType, content: a.content, ...(a.contentId ? { content_id: a.contentId } : {}) }));
}

/**
 * The `email__send` job, keyed by the email so a re-enqueue replaces a waiting one. Its own
 * attempts only cover crashes; provider retries are rescheduled by the task (send.task.ts).
 */
export function sendJob(sql: Sql | TxSql, emailId: string, projectId: string, delayMs = 0, priority: number | PendingQuery<Row[]> = 0) {
  return sql`graphile_worker.add_job('email__send',
    json_build_object('email_id', ${emailId}::text, 'project_id', ${projectId}::text),
    run_at := now() + ${delayMs} * interval '1 millisecond', max_attempts := 25, job_key := ${emailId}::text, priority := ${priority}::int)`;
}

/**
 * Many emails and their `email__send` jobs in one statement, so atomic on its own: one round
 * trip, and one NOTIFY from `add_jobs` however many rows.
 *
 * Submitted messages travel apart from the rows' JSON, as one bytea parameter that each row
 * takes its slice of: inside the JSON each would be a base64 string that PostgreSQL parses as
 * JSON text and then decodes, which for eight 50 KB messages took 7.4 ms against 4.1 ms this way
 * (1.5 KB ones: 0.25 against 0.15 ms).
 */
export async function insertQueuedEmails(tx: Sql | TxSql, emails: NewEmail[]) {
  if (emails.length === 0) return;
  const raws: Buffer[] = [];
  let rawAt = 1;
  const rawSlice = (raw: Buffer | undefined) => {
    if (!raw) return { raw_at: null, raw_length: null };
    raws.push(raw);
    rawAt += raw.length;
    return { raw_at: rawAt - raw.length, raw_length: raw.length };
  };
  const rows = emails.map((e) => ({
    id: e.id, project_id: e.projectId, from_address: e.from, to_addresses: e.to, cc_addresses: e.cc,
    bcc_addresses: e.bcc, reply_to_addresses: e.replyTo, subject: e.subject, html: e.html, text: e.text,
    headers: e.headers,
    attachments: storedAttachments(e.attachments),
    scheduled_at: e.scheduledAt?.toISOString() ?? null,
    tags: e.tags ?? [],
    track_opens: e.trackOpens ?? null,
    track_clicks: e.trackClicks ?? null,
    template_id: e.template?.id ?? null,
    template_version: e.template?.version ?? null,
    source: e.submitted ? 'smtp' : 'api',
    ...rawSlice(e.submitted?.raw),
    message_id_header: e.submitted?.messageId ?? null,
    submitted_message_id: e.submitted?.messageId ?? null,
    broadcast_id: e.broadcastId ?? null,
    topic_id: e.topicId ?? null,
  }));
  await tx`
    with inserted as (
      insert into emails (id, project_id, status, from_address, to_addresses, cc_addresses, bcc_addresses,
                          reply_to_addresses, subject, html, text, headers, attachments, scheduled_at, tags,
                          track_opens, track_clicks, template_id, template_version, source, raw_message, message_id_header, submitted_message_id, broadcast_id, topic_id)
      select r.id, r.project_id, case when r.scheduled_at > now() then 'scheduled' else 'queued' end,
             r.from_address, r.to_addresses, r.cc_addresses, r.bcc_addresses,
             r.reply_to_addresses, r.subject, r.html, r.text, r.headers, r.attachments,
             case when r.scheduled_at > now() then r.scheduled_at end, r.tags, r.track_opens, r.track_clicks, r.template_id, r.template_version,
             r.source, substring(${raws.length ? Buffer.concat(raws) : null}::bytea from r.raw_at for r.raw_length),
             r.message_id_header, r.submitted_message_id, r.broadcast_id, r.topic_id
      from jsonb_to_recordset(${tx.json(rows)}) as r(
        id text, project_id text, from_address text, to_addresses text[], cc_addresses text[], bcc_addresses text[],
        reply_to_addresses text[], subject text, html text, text text, headers jsonb, attachments jsonb, scheduled_at timestamptz, tags jsonb,
        track_opens boolean, track_clicks boolean, template_id text, template_version integer, source text, raw_at integer, raw_length integer,
        message_id_header text, submitted_message_id text, broadcast_id text, topic_id text)
      returning id, project_id, scheduled_at, tags, submitted_message_id, to_addresses, cc_addresses, bcc_addresses, broadcast_id
    ),
    submitted as (
      insert into submitted_message_ids (project_id, message_id, email_id)
      select project_id, submitted_message_id, id from inserted where submitted_message_id is not null
    ),
    tagged as (
      insert into email_tags (project_id, name, value, email_id)
      select i.project_id, t->>'name', t->>'value', i.id
      from inserted i cross join lateral jsonb_array_elements(i.tags) t
      on conflict do nothing
    ),
    addressed as (
      insert into email_recipients (project_id, address, email_id)
      select i.project_id, mailroom_bare_address(a), i.id
      from inserted i cross join lateral unnest(i.to_addresses || i.cc_addresses || i.bcc_addresses) a
      on conflict do nothing
      returning project_id, address, mailroom_partition_day(tableoid::regclass::text) as day
    ),
    addressed_days as (
      -- Read first, so that only a day's first email to the address writes (and waits on) its row.
      insert into recipient_days (project_id, address, day)
      select distinct a.project_id, a.address, a.day from addressed a
      where not exists (select 1 from recipient_days d where d.project_id = a.project_id and d.address = a.address and d.day = a.day)
      on conflict do nothing
    )
    select count(*) from graphile_worker.add_jobs(array(
      select row('email__send', json_build_object('email_id', id, 'project_id', project_id), null,
                 coalesce(scheduled_at, now()), 25, id,
                 case when broadcast_id is null then 0 else ${BROADCAST_SEND_PRIORITY} end, null)::graphile_worker.job_spec
      from inserted))`;
}

/** An email's addresses and content as its row holds them (bcc included: for sending only). */
export type EmailEnvelopeRow = {
  fromAddress: string;
  toAddresses: string[];
  ccAddresses: string[];
  bccAddresses: string[];
  replyToAddresses: string[];
  subject: string;
  html: string | null;
  text: string | null;
};

export type ClaimedEmail = EmailEnvelopeRow & {
  id: string;
  projectId: string;
  attemptCount: number;
  headers: Record<string, string>;
  attachments: StoredAttachment[];
  messageIdHeader: string | null;
  /** The message as submitted over SMTP, sent as it is; null for API mail, which is composed. */
  rawMessage: Buffer | null;
  /** A relayed email's text and html, read from its message by the worker to be stored as it settles. */
  bodiesRead?: { text: string | null; html: string | null };
  leaseOwner: string;
  tags: { name: string; value: string }[];
  /** Whether the project has a provider connection; without one the email goes to the sink. */
  hasProvider: boolean;
  /** Whether the project suppresses any address at all; if not, no recipient needs checking. */
  hasSuppressions: boolean;
  trackOpens: boolean | null;
  trackClicks: boolean | null;
  /** The tracking settings of the sender's domain, when the project has that domain. */
  domainTracking: DomainTracking | null;
  /** Retention took its html, text and attachments: it must never go out (§18.5). */
  bodyPurged: boolean;
  /** The partition its row is in, which the statements settling it name (day-table.ts). */
  table: EmailsTable;
  broadcastId: string | null;
  topicId: string | null;
};

/** Who claims, for how long, when a silent holder counts as dead, and this process's own holder. */
export type ClaimLease = { owner: string; seconds: number; deadAfterSeconds: number; self?: { id: string; busy: boolean } };

/**
 * Moves an email to `sending` and takes its lease in the same statement, which also returns what
 * the send needs to know of its project: a `queued` email, or one left in `sending` by an attempt
 * that can no longer be sending it. Anything else (sent, failed, or a lease held elsewhere)
 * returns nothing, which is what keeps a job that runs twice from sending twice.
 *
 * A lease held elsewhere is taken over only when its holder gave it up, when its holder's pool
 * was declared ended (stopped, or silent while a judge kept beating: `ended_at`), or when it ran
 * out and its holder no longer beats. A missing heartbeat row never overrides a live lease, and a
 * holder that beats keeps even a lease that ran out (for up to 15 minutes): after a database
 * outage it may hold a send the provider accepted and has yet to record (settle-later.ts).
 * `self` is this process's holder: a lease it holds on an email it is not working on (a claim
 * whose answer was lost) is its own to take again.
 */
export async function claimEmail(
  sql: Sql,
  projectId: string,
  emailId: string,
  lease: ClaimLease,
): Promise<ClaimedEmail | undefined> {
  return inEmailsDay(sql, emailId, (table) => claimIn(sql, table, projectId, emailId, lease));
}

async function claimIn(
  sql: Sql,
  table: EmailsTable,
  projectId: string,
  emailId: string,
  lease: ClaimLease,
) {
  const holder = sql`split_part(emails.lease_owner, '/', 1)`;
  // Committed with the claims and settles of other jobs running now: one WAL flush for many.
  const [row] = await commitShared(sql, (tx) => tx<Omit<ClaimedEmail, 'table'>[]>`
    update ${tx(table)} emails set status = 'sending', attempt_count = attempt_count + 1, updated_at = now(),
      lease_owner = ${lease.owner}, lease_expires_at = now() + make_interval(secs => ${lease.seconds})
    where id = ${emailId} and project_id = ${projectId}
      and (((status = 'queued' or (status = 'scheduled' and scheduled_at <= now() + interval '1 second'))
          -- A project paused for its reputation (§19.4) holds its mail: nothing new leaves.
          and not exists (select 1 from project_reputation r where r.project_id = emails.project_id and r.paused_at is not null))
        or (status = 'sending' and (
          lease_owner is null
          or exists (select 1 from worker_heartbeats h where h.pool_id = ${holder} and h.ended_at is not null)
          -- A holder's silence counts from when the database last started, if later (§18.8): one
          -- that could not beat only because the server was away is not dead, and is given the
          -- dead-after window to beat again once it is back (its leases are re-asserted then).
          or (coalesce(lease_expires_at < now(), true) and not exists (
            select 1 from worker_heartbeats h
            where h.pool_id = ${holder} and h.ended_at is null
              and greatest(h.last_seen_at, pg_postmaster_start_time()) > now() - make_interval(secs => ${lease.deadAfterSeconds})
              and emails.lease_expires_at > now() - interval '15 minutes'))
          ${lease.self && !lease.self.busy ? sql`or ${holder} = ${lease.self.id}` : sql``})))
    returning id, project_id, attempt_count, from_address, to_addresses, cc_addresses, bcc_addresses,
      reply_to_addresses, subject, html, text, headers, attachments, message_id_header, raw_message, lease_owner, tags,
      exists (select 1 from provider_connections pc where pc.project_id = emails.project_id) as has_provider,
      exists (select 1 from suppressions s where s.project_id = emails.project_id) as has_suppressions,
      track_opens, track_clicks, body_purged, broadcast_id, topic_id,
      -- The sender's domain is after the last @ of the validated From mailbox.
      (select json_build_object('openTracking', d.open_tracking, 'clickTracking', d.click_tracking, 'trackingDomain', d.tracking_domain)
       from domains d where d.project_id = emails.project_id
         and d.value = lower(substring(emails.from_address from '@([^@<>[:space:]]+)>?[[:space:]]*$'))) as domain_tracking`);
  return row && { ...row, table };
}

/**
 * When to look again at an email another attempt holds: at its lease's end, or, for a lease that
 * ran out while its holder still beats (a record it has yet to make), in a few seconds.
 * Undefined once the email is no longer `sending`.
 */
export async function liveLeaseEnd(sql: Sql, projectId: string, emailId: string) {
  const [row] = await inEmailsDay(sql, emailId, (table) => sql<[{ leaseExpiresAt: Date }?]>`
    select greatest(lease_expires_at, now() + interval '5 seconds') as lease_expires_at from ${sql(table)}
    where id = ${emailId} and project_id = ${projectId} and status = 'sending'`);
  return row?.leaseExpiresAt;
}

/**
 * Why a queued email was not claimed. `held`: its project is paused, and the resume gives it its
 * job again (§19.4); a scheduled email that fell due meanwhile waits as `queued` with the rest.
 * `claimable`: a resume came between the claim and this look, so the claim must be tried again:
 * the resume may have re-queued its mail before this email's row was visible to it (a page or a
 * send committed at that moment). The pause row is read `for share`, so a resume in progress is
 * waited for, never read half-done. `other`: not queued (another attempt holds it, or it is settled).
 */
export async function holdIfPaused(sql: Sql, projectId: string, emailId: string): Promise<'held' | 'claimable' | 'other'> {
  const [row] = await inEmailsDay(sql, emailId, (table) => sql<[{ paused: boolean; queued: boolean }?]>`
    with paused as (select 1 from project_reputation where project_id = ${projectId} and paused_at is not null for share),
    held as (
      update ${sql(table)} set status = 'queued', updated_at = now()
      where id = ${emailId} and project_id = ${projectId} and status = 'scheduled' and scheduled_at <= now() + interval '1 second'
        and exists (select 1 from paused)
      returning id)
    select exists (select 1 from paused) as paused, (exists (select 1 from held) or exists (
      select 1 from ${sql(table)} where id = ${emailId} and project_id = ${projectId} and status = 'queued')) as queued`);
  if (!row?.queued) return 'other';
  return row.paused ? 'held' : 'claimable';
}

/**
 * The email's job again at `delayMs` from now, keyed by the email so it replaces a waiting one, at
 * the email's own priority: a broadcast copy stays behind transactional mail.
 */
export async function enqueueSendAgain(sql: Sql, projectId: string, emailId: string, delayMs: number) {
  await inEmailsDay(sql, emailId, (table) => sql`
    select ${sendJob(sql, emailId, projectId, delayMs, sendPriorityOfRow(sql))}
    from ${sql(table)} where id = ${emailId} and project_id = ${projectId}`);
}

/** The statements settling a claimed email name its partition, aliased `emails` (day-table.ts). */
const CLAIMED = (sql: Sql | TxSql, email: ClaimedEmail) => sql`${sql(email.table)} emails`;

const HELD = (sql: Sql | TxSql, email: ClaimedEmail) =>
  sql`id = ${email.id} and project_id = ${email.projectId} and status = 'sending' and lease_owner = ${email.leaseOwner}`;

/** The lease-release UPDATE both give-ups run, returning the email's id when the attempt still held it. */
function releaseLease(sql: Sql, email: ClaimedEmail) {
  return sql`update ${CLAIMED(sql, email)} set lease_owner = null, lease_expires_at = now(), updated_at = now() where ${HELD(sql, email)} returning id`;
}

/**
 * Ends this attempt's lease now, leaving the email `sending`: the next claim may take it at once
 * instead of waiting for the lease to run out.
 */
export async function giveUpLease(sql: Sql, email: ClaimedEmail) {
  await releaseLease(sql, email);
}

/**
 * Gives up this attempt's lease and runs the email's job again now, in one statement: for a
 * give-up made late, after the job's retry may have found the lease live and set itself to wait
 * for its end. False, and nothing done, if the attempt no longer holds the lease.
 */
export async function giveUpLeaseLate(sql: Sql, email: ClaimedEmail): Promise<boolean> {
  const rows = await sql`
    with released as (${releaseLease(sql, email)})
    select ${sendJob(sql, email.id, email.projectId, 0, sendPriority(email.broadcastId))} from released`;
  return rows.length > 0;
}

/**
 * Stores the text and html the worker read from a relayed email's message, so no read of the
 * email parses it; nothing for other mail. Bodies already there (or purged meanwhile) are kept.
 */
const storeBodiesRead = (tx: TxSql | Sql, email: ClaimedEmail) => (email.bodiesRead
  ? tx`html = case when body_purged then html else coalesce(html, ${email.bodiesRead.html}) end,
      text = case when body_purged then text else coalesce(text, ${email.bodiesRead.text}) end,`
  : tx``);

/**
 * `sent` (plus `delivered` for the sink, which is the receiving server) with its events, their
 * webhook deliveries and jobs: one statement, one round trip. False if the lease was lost, and
 * then nothing is recorded.
 */
export async function markSent(sql: Sql, email: ClaimedEmail, providerMessageId: string, delivered: boolean, events: EmailEvent[]) {
  const [row] = await commitShared(sql, (tx) => recordEventsStatement(tx, tx`
    update ${CLAIMED(tx, email)} set status = 'sent', sent_at = now(), provider_message_id = ${providerMessageId},
      delivered_at = ${delivered ? tx`now()` : tx`delivered_at`}, last_error = null, updated_at = now(),
      ${storeBodiesRead(tx, email)} lease_owner = null, lease_expires_at = null
    where ${HELD(tx, email)}
    returning id, project_id, tags, broadcast_id`, events));
  return row!.matched > 0;
}

/** `failed` with its `email.failed` event, deliveries and jobs, in one statement. False if the lease was lost. */
export async function markFailed(sql: Sql, email: ClaimedEmail, lastError: string, events: EmailEvent[]) {
  const [row] = await commitShared(sql, (tx) => recordEventsStatement(tx, tx`
    update ${CLAIMED(tx, email)} set status = 'failed', last_error = ${lastError}, updated_at = now(),
      ${storeBodiesRead(tx, email)} lease_owner = null, lease_expires_at = null
    where ${HELD(tx, email)}
    returning id, project_id, tags, broadcast_id`, events));
  return row!.matched > 0;
}

/**
 * Back to `queued` with a new job in `delayMs`. `countsAsAttempt` false (pacing, throttling, a
 * spent quota) gives the attempt back: the message was never the problem.
 */
export async function requeue(sql: Sql, email: ClaimedEmail, delayMs: number, countsAsAttempt: boolean) {
  // One statement, so atomic without a transaction block: a block whose connection the server
  // ends goes back to postgres.js's pool all the same, and the next query on it never settles.
  await sql`
    with requeued as (
      update ${CLAIMED(sql, email)} set status = 'queued', updated_at = now(), lease_owner = null, lease_expires_at = null,
        attempt_count = attempt_count - ${countsAsAttempt ? 0 : 1}
      where ${HELD(sql, email)}
      returning id
    )
    select ${sendJob(sql, email.id, email.projectId, delayMs, sendPriority(email.broadcastId))} from requeued`;
}

/**
 * Moves a scheduled email to `at` and replaces its job (the same job key), in one transaction. A
 * time not in the future makes it `queued` now. Undefined when the email is not `scheduled`.
 */
export async function rescheduleEmail(sql: Sql, projectId: string, emailId: string, at: Date) {
  return sql.begin(async (tx) => {
    const [row] = await tx<[{ scheduledAt: Date | null }?]>`
      update emails set
        status = case when ${at} > now() then 'scheduled' else 'queued' end,
        scheduled_at = case when ${at} > now() then ${at}::timestamptz end,
        updated_at = now()
      where id = ${emailId} and project_id = ${projectId} and status = 'scheduled'
      returning scheduled_at`;
    if (!row) return undefined;
    // The job's time comes from the row just written, on the database's clock: a process whose
    // clock runs ahead or behind would otherwise put the job before or after the schedule.
    await tx`
      select graphile_worker.add_job('email__send',
        json_build_object('email_id', e.id, 'project_id', e.project_id),
        run_at := coalesce(e.scheduled_at, now()), max_attempts := 25, job_key := e.id)
      from emails e where e.id = ${emailId} and e.project_id = ${projectId}`;
    return row;
  });
}

/** `canceled`, and its waiting job removed. Undefined when the email is not `scheduled`. */
export async function cancelEmail(sql: Sql, projectId: string, emailId: string) {
  return sql.begin(async (tx) => {
    const [row] = await tx<[{ id: string }?]>`
      update emails set status = 'canceled', scheduled_at = null, updated_at = now()
      where id = ${emailId} and project_id = ${projectId} and status = 'scheduled'
      returning id`;
    // A job already running finds the email canceled and sends nothing; a waiting one goes.
    if (row) await tx`select graphile_worker.remove_job(${emailId})`;
    return row;
  });
}
