import type { Sql, TxSql } from '../platform/db.ts';
import { effectiveSubscriptionSql, type Subscription } from '../contacts/subscription.ts';

type Db = Sql | TxSql;
export type Visibility = 'public' | 'private';
export type TopicRow = {
  id: string; projectId: string; name: string; description: string | null;
  defaultSubscription: Subscription; visibility: Visibility; createdAt: Date;
};
export type PageOptions = { limit: number; startingAfter?: string; endingBefore?: string };

const COLUMNS = (sql: Db) => sql`t.id, t.project_id, t.name, t.description, t.default_subscription, t.visibility, t.created_at`;

export async function insertTopic(tx: Db, t: Omit<TopicRow, 'createdAt'>) {
  const [row] = await tx<[TopicRow]>`
    insert into topics as t (id, project_id, name, description, default_subscription, visibility)
    values (${t.id}, ${t.projectId}, ${t.name}, ${t.description}, ${t.defaultSubscription}, ${t.visibility})
    returning ${COLUMNS(tx)}`;
  return row;
}

export async function getTopic(sql: Db, projectId: string, id: string) {
  const [row] = await sql<[TopicRow?]>`select ${COLUMNS(sql)} from topics t where t.id = ${id} and t.project_id = ${projectId}`;
  return row;
}

/** `default_subscription` is fixed at creation, so it is not among what can change. */
export async function updateTopic(tx: Db, projectId: string, id: string, change: { name?: string; description?: string | null; visibility?: Visibility }) {
  const set = (column: string, value: unknown) => (value === undefined ? tx`` : tx`, ${tx(column)} = ${value as string}`);
  const [row] = await tx<[TopicRow?]>`
    update topics t set id = id ${set('name', change.name)} ${set('description', change.description)} ${set('visibility', change.visibility)}
    where t.id = ${id} and t.project_id = ${projectId} returning ${COLUMNS(tx)}`;
  return row;
}

export async function deleteTopic(tx: Db, projectId: string, id: string) {
  const rows = await tx`delete from topics where id = ${id} and project_id = ${projectId} returning id`;
  return rows.length > 0;
}

/** Every topic of the project, oldest first: a project has few (SES allows 20 per list). */
export async function allTopics(sql: Db, projectId: string) {
  return sql<TopicRow[]>`select ${COLUMNS(sql)} from topics t where t.project_id = ${projectId} order by t.id`;
}

export type ContactTopicRow = TopicRow & { subscription: Subscription };

/** The project's topics with the contact's effective subscription to each, newest first, paged. */
export async function listContactTopics(sql: Db, projectId: string, contactId: string, page: PageOptions) {
  const select = sql`select ${COLUMNS(sql)}, ${effectiveSubscriptionSql(sql)} as subscription
    from topics t left join contact_topics ct on ct.contact_id = ${contactId} and ct.topic_id = t.id
    where t.project_id = ${projectId}`;
  const rows = page.endingBefore
    ? (await sql<ContactTopicRow[]>`${select} and t.id > ${page.endingBefore} order by t.id asc limit ${page.limit + 1}`).reverse()
    : await sql<ContactTopicRow[]>`${select} ${page.startingAfter ? sql`and t.id < ${page.startingAfter}` : sql``} order by t.id desc limit ${page.limit + 1}`;
  const hasMore = rows.length > page.limit;
  return { rows: page.endingBefore ? rows.slice(Math.max(0, rows.length - page.limit)) : rows.slice(0, page.limit), hasMore };
}

/** Which of `ids` are topics of the project. */
export async function existingTopics(sql: Db, projectId: string, ids: string[]) {
  if (!ids.length) return new Set<string>();
  const rows = await sql<{ id: string }[]>`select id from topics where project_id = ${projectId} and id = any(${ids}::text[])`;
  return new Set(rows.map((r) => r.id));
}
