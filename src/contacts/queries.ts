import type { Sql, TxSql } from '../platform/db.ts';

export type PropertyValue = string | number;

export type ContactRow = {
  id: string;
  projectId: string;
  email: string;
  firstName: string | null;
  lastName: string | null;
  unsubscribed: boolean;
  properties: Record<string, PropertyValue>;
  /** The segments the contact is in, oldest membership first. */
  segmentIds: string[];
  createdAt: Date;
  updatedAt: Date;
};

type Db = Sql | TxSql;

// segment_ids reads contact_segments_by_contact: one index range per contact shown.
const COLUMNS = (sql: Db) => sql`c.id, c.project_id, c.email, c.first_name, c.last_name, c.unsubscribed, c.properties, c.created_at, c.updated_at,
  array(select cs.segment_id from contact_segments cs where cs.contact_id = c.id order by cs.created_at, cs.segment_id) as segment_ids`;

/** A path segment with an `@` is an address (case-insensitive); anything else is an id. */
const byIdOrEmail = (sql: Db, projectId: string, idOrEmail: string) =>
  sql`c.project_id = ${projectId} and ${idOrEmail.includes('@') ? sql`lower(c.email) = lower(${idOrEmail})` : sql`c.id = ${idOrEmail}`}`;

export async function getContact(sql: Db, projectId: string, idOrEmail: string) {
  const [row] = await sql<[ContactRow?]>`select ${COLUMNS(sql)} from contacts c where ${byIdOrEmail(sql, projectId, idOrEmail)}`;
  return row;
}

/** Locks the row for the rest of the caller's transaction (an update or delete follows). */
export async function lockContact(tx: TxSql, projectId: string, idOrEmail: string) {
  const [row] = await tx<[ContactRow?]>`select ${COLUMNS(tx)} from contacts c where ${byIdOrEmail(tx, projectId, idOrEmail)} for update of c`;
  return row;
}

export type NewContact = {
  id: string; projectId: string; email: string; firstName: string | null; lastName: string | null;
  unsubscribed: boolean; properties: Record<string, PropertyValue>;
};

/** Inserts the contact, or nothing when the address is taken: the caller then names the holder. */
export async function insertContact(tx: Db, c: NewContact) {
  const [row] = await tx<[{ id: string }?]>`
    insert into contacts (id, project_id, email, first_name, last_name, unsubscribed, properties)
    values (${c.id}, ${c.projectId}, ${c.email}, ${c.firstName}, ${c.lastName}, ${c.unsubscribed}, ${tx.json(c.properties)})
    on conflict (project_id, lower(email)) do nothing
    returning id`;
  return row?.id;
}

export type ContactChange = {
  firstName?: string | null; lastName?: string | null; unsubscribed?: boolean;
  /** Keys to set; a null value removes the key. */
  properties?: Record<string, PropertyValue | null>;
};

export async function updateContact(tx: Db, projectId: string, id: string, change: ContactChange) {
  const set = (column: string, value: unknown) => (value === undefined ? tx`` : tx`, ${tx(column)} = ${value as string}`);
  const props = change.properties ?? {};
  const setProps = Object.fromEntries(Object.entries(props).filter(([, v]) => v !== null));
  const cleared = Object.keys(props).filter((k) => props[k] === null);
  await tx`
    update contacts set updated_at = now()
      ${set('first_name', change.firstName)} ${set('last_name', change.lastName)} ${set('unsubscribed', change.unsubscribed)}
      ${change.properties === undefined ? tx`` : tx`, properties = (properties - ${cleared}::text[]) || ${tx.json(setProps)}`}
    where id = ${id} and project_id = ${projectId}`;
}

export async function deleteContact(tx: Db, projectId: string, id: string) {
  const rows = await tx`delete from contacts where id = ${id} and project_id = ${projectId} returning id`;
  return rows.length > 0;
}

export type ContactListFilter = { segmentId?: string; email?: string };
export type PageOptions = { limit: number; startingAfter?: string; endingBefore?: string };

/**
 * Newest first by id, one extra row for has_more. With a segment, the walk is over the
 * contact_segments primary key (segment_id, contact_id); otherwise over (project_id, id); an email
 * filter is one probe of (project_id, lower(email)).
 */
export async function listContacts(sql: Db, projectId: string, filter: ContactListFilter, page: PageOptions) {
  const source = filter.segmentId
    ? sql`contact_segments m join contacts c on c.id = m.contact_id and c.project_id = ${projectId}
          where m.segment_id = ${filter.segmentId} and m.project_id = ${projectId}`
    : sql`contacts c where c.project_id = ${projectId}`;
  const key = filter.segmentId ? sql`m.contact_id` : sql`c.id`;
  const email = filter.email === undefined ? sql`` : sql`and lower(c.email) = lower(${filter.email})`;
  const rows = page.endingBefore
    ? (await sql<ContactRow[]>`
        select ${COLUMNS(sql)} from ${source} ${email} and ${key} > ${page.endingBefore}
        order by ${key} asc limit ${page.limit + 1}`).reverse()
    : await sql<ContactRow[]>`
        select ${COLUMNS(sql)} from ${source} ${email} ${page.startingAfter ? sql`and ${key} < ${page.startingAfter}` : sql``}
        order by ${key} desc limit ${page.limit + 1}`;
  const hasMore = rows.length > page.limit;
  return { rows: page.endingBefore ? rows.slice(Math.max(0, rows.length - page.limit)) : rows.slice(0, page.limit), hasMore };
}

/** Adds the contact to the segment; false when it already was in it. */
export async function addToSegment(tx: Db, projectId: string, contactId: string, segmentId: string) {
  const rows = await tx`
    insert into contact_segments (segment_id, contact_id, project_id) values (${segmentId}, ${contactId}, ${projectId})
    on conflict do nothing returning segment_id`;
  return rows.length > 0;
}

export async function removeFromSegment(tx: Db, projectId: string, contactId: string, segmentId: string) {
  const rows = await tx`
    delete from contact_segments where segment_id = ${segmentId} and contact_id = ${contactId} and project_id = ${projectId}
    returning segment_id`;
  return rows.length > 0;
}

/**
 * Sets the contact's choice per topic; returns the topics whose choice changed. Rows are written
 * in topic order so two requests on one contact cannot deadlock.
 */
export async function setTopicChoices(tx: Db, projectId: string, contactId: string, choices: { id: string; subscription: string }[]) {
  if (!choices.length) return [];
  const sorted = [...choices].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const rows = await tx<{ topicId: string }[]>`
    insert into contact_topics (contact_id, topic_id, project_id, subscription)
    select ${contactId}, x.id, ${projectId}, x.subscription
    from jsonb_to_recordset(${tx.json(sorted)}) as x(id text, subscription text)
    order by x.id
    on conflict (contact_id, topic_id) do update set subscription = excluded.subscription, updated_at = now()
      where contact_topics.subscription is distinct from excluded.subscription
    returning topic_id`;
  return rows.map((r) => r.topicId);
}
