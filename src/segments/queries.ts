import type { Sql, TxSql } from '../platform/db.ts';

type Db = Sql | TxSql;
export type SegmentRow = { id: string; projectId: string; name: string; createdAt: Date };
export type PageOptions = { limit: number; startingAfter?: string; endingBefore?: string };

export async function insertSegment(tx: Db, s: { id: string; projectId: string; name: string }) {
  const [row] = await tx<[SegmentRow]>`
    insert into segments (id, project_id, name) values (${s.id}, ${s.projectId}, ${s.name})
    returning id, project_id, name, created_at`;
  return row;
}

export async function getSegment(sql: Db, projectId: string, id: string) {
  const [row] = await sql<[SegmentRow?]>`select id, project_id, name, created_at from segments where id = ${id} and project_id = ${projectId}`;
  return row;
}

export async function renameSegment(tx: Db, projectId: string, id: string, name: string) {
  const [row] = await tx<[SegmentRow?]>`
    update segments set name = ${name} where id = ${id} and project_id = ${projectId} returning id, project_id, name, created_at`;
  return row;
}

/** Deletes the segment and (by cascade) its memberships; the contacts stay. */
export async function deleteSegment(tx: Db, projectId: string, id: string) {
  const rows = await tx`delete from segments where id = ${id} and project_id = ${projectId} returning id`;
  return rows.length > 0;
}

/** Newest first; with `contactId`, only the segments that contact is in. One extra row answers has_more. */
export async function listSegments(sql: Db, projectId: string, page: PageOptions, contactId?: string) {
  const member = contactId === undefined ? sql`` : sql`and exists (select 1 from contact_segments cs where cs.segment_id = s.id and cs.contact_id = ${contactId})`;
  const rows = page.endingBefore
    ? (await sql<SegmentRow[]>`
        select id, project_id, name, created_at from segments s where project_id = ${projectId} ${member} and id > ${page.endingBefore}
        order by id asc limit ${page.limit + 1}`).reverse()
    : await sql<SegmentRow[]>`
        select id, project_id, name, created_at from segments s where project_id = ${projectId} ${member}
          ${page.startingAfter ? sql`and id < ${page.startingAfter}` : sql``}
        order by id desc limit ${page.limit + 1}`;
  const hasMore = rows.length > page.limit;
  return { rows: page.endingBefore ? rows.slice(Math.max(0, rows.length - page.limit)) : rows.slice(0, page.limit), hasMore };
}

/** Which of `ids` are segments of the project. */
export async function existingSegments(sql: Db, projectId: string, ids: string[]) {
  if (!ids.length) return new Set<string>();
  const rows = await sql<{ id: string }[]>`select id from segments where project_id = ${projectId} and id = any(${ids}::text[])`;
  return new Set(rows.map((r) => r.id));
}

/** The ids of the segment's members, for the events a segment's deletion changes (bounded by the caller). */
export async function segmentMemberIds(sql: Db, projectId: string, segmentId: string) {
  const rows = await sql<{ contactId: string }[]>`
    select contact_id from contact_segments where segment_id = ${segmentId} and project_id = ${projectId} order by contact_id`;
  return rows.map((r) => r.contactId);
}

/**
 * Members per segment, each counted only up to `cap` (one index range of the primary key each,
 * never more than cap + 1 rows): a page of segments costs the same at any segment size.
 */
export async function segmentMemberCounts(sql: Db, projectId: string, ids: string[], cap: number) {
  if (!ids.length) return new Map<string, number>();
  const rows = await sql<{ id: string; members: number }[]>`
    select s.id, (select count(*)::int from (
      select 1 from contact_segments cs where cs.segment_id = s.id and cs.project_id = ${projectId} limit ${cap + 1}) m) as members
    from segments s where s.project_id = ${projectId} and s.id = any(${ids}::text[])`;
  return new Map(rows.map((r) => [r.id, r.members]));
}
