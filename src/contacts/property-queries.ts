import type { Sql, TxSql } from '../platform/db.ts';

type Db = Sql | TxSql;
export type PropertyType = 'string' | 'number';
export type ContactPropertyRow = { id: string; projectId: string; key: string; type: PropertyType; fallbackValue: string | number | null; createdAt: Date };
export type PageOptions = { limit: number; startingAfter?: string; endingBefore?: string };

const COLUMNS = (sql: Db) => sql`id, project_id, key, type, fallback_value, created_at`;

/** Inserts the property, or nothing when its key is taken. */
export async function insertProperty(tx: Db, p: Omit<ContactPropertyRow, 'createdAt'>) {
  const [row] = await tx<[ContactPropertyRow?]>`
    insert into contact_properties (id, project_id, key, type, fallback_value)
    values (${p.id}, ${p.projectId}, ${p.key}, ${p.type}, ${p.fallbackValue === null ? null : tx.json(p.fallbackValue)})
    on conflict (project_id, key) do nothing
    returning ${COLUMNS(tx)}`;
  return row;
}

export async function getProperty(sql: Db, projectId: string, id: string) {
  const [row] = await sql<[ContactPropertyRow?]>`select ${COLUMNS(sql)} from contact_properties where id = ${id} and project_id = ${projectId}`;
  return row;
}

export async function getPropertyByKey(sql: Db, projectId: string, key: string) {
  const [row] = await sql<[ContactPropertyRow?]>`select ${COLUMNS(sql)} from contact_properties where key = ${key} and project_id = ${projectId}`;
  return row;
}

/** The declared properties among `keys`, by key. */
export async function propertiesByKey(sql: Db, projectId: string, keys: string[]) {
  if (!keys.length) return new Map<string, ContactPropertyRow>();
  const rows = await sql<ContactPropertyRow[]>`select ${COLUMNS(sql)} from contact_properties where project_id = ${projectId} and key = any(${keys}::text[])`;
  return new Map(rows.map((r) => [r.key, r]));
}

export async function allProperties(sql: Db, projectId: string) {
  return sql<ContactPropertyRow[]>`select ${COLUMNS(sql)} from contact_properties where project_id = ${projectId} order by id`;
}

export async function setFallback(tx: Db, projectId: string, id: string, fallbackValue: string | number | null) {
  const [row] = await tx<[ContactPropertyRow?]>`
    update contact_properties set fallback_value = ${fallbackValue === null ? null : tx.json(fallbackValue)}
    where id = ${id} and project_id = ${projectId} returning ${COLUMNS(tx)}`;
  return row;
}

/**
 * Deletes the property and its values on every contact, so a key declared again later (maybe
 * with another type) starts empty.
 */
export async function deleteProperty(tx: Db, projectId: string, id: string) {
  const [row] = await tx<[{ key: string }?]>`delete from contact_properties where id = ${id} and project_id = ${projectId} returning key`;
  if (!row) return false;
  await tx`update contacts set properties = properties - ${row.key}::text where project_id = ${projectId} and properties ? ${row.key}`;
  return true;
}

export async function listProperties(sql: Db, projectId: string, page: PageOptions) {
  const rows = page.endingBefore
    ? (await sql<ContactPropertyRow[]>`
        select ${COLUMNS(sql)} from contact_properties where project_id = ${projectId} and id > ${page.endingBefore}
        order by id asc limit ${page.limit + 1}`).reverse()
    : await sql<ContactPropertyRow[]>`
        select ${COLUMNS(sql)} from contact_properties where project_id = ${projectId}
          ${page.startingAfter ? sql`and id < ${page.startingAfter}` : sql``}
        order by id desc limit ${page.limit + 1}`;
  const hasMore = rows.length > page.limit;
  return { rows: page.endingBefore ? rows.slice(Math.max(0, rows.length - page.limit)) : rows.slice(0, page.limit), hasMore };
}
