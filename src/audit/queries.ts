import type { Sql } from '../platform/db.ts';
import type { Actor } from './actor.ts';

export type AuditRow = {
  id: string;
  at: Date;
  actorType: Actor['type'];
  actorId: string | null;
  actorLabel: string | null;
  action: string;
  projectId: string | null;
  targetType: string;
  targetId: string | null;
  ip: string | null;
  changes: Record<string, unknown> | null;
};

export type AuditFilter = {
  limit: number;
  startingAfter?: string;
  /** A project's entries; `null` the instance's own (members); undefined every entry. */
  projectId?: string | null;
  action?: string;
  actorType?: Actor['type'];
  actorId?: string;
};

/** Newest first (ids are ULIDs, so id order is time order); one extra row answers has_more. */
export async function listAudit(sql: Sql, f: AuditFilter) {
  const rows = await sql<AuditRow[]>`
    select id, at, actor_type, actor_id, actor_label, action, project_id, target_type, target_id, ip, changes
    from audit_log
    where true
      ${f.projectId === undefined ? sql`` : f.projectId === null ? sql`and project_id is null` : sql`and project_id = ${f.projectId}`}
      ${f.action ? sql`and action = ${f.action}` : sql``}
      ${f.actorType ? sql`and actor_type = ${f.actorType}` : sql``}
      ${f.actorId ? sql`and actor_id = ${f.actorId}` : sql``}
      ${f.startingAfter ? sql`and id < ${f.startingAfter}` : sql``}
    order by id desc
    limit ${f.limit + 1}`;
  return { rows: rows.slice(0, f.limit), hasMore: rows.length > f.limit };
}

/** Whether the entry exists among those the caller may see (a project's, or all). */
export async function auditEntryExists(sql: Sql, id: string, projectId?: string) {
  const [row] = await sql<[{ id: string }?]>`
    select id from audit_log where id = ${id} ${projectId === undefined ? sql`` : sql`and project_id = ${projectId}`}`;
  return Boolean(row);
}

/** The actors seen in the log, for the dashboard's filter. */
export async function listAuditActors(sql: Sql) {
  return sql<{ actorType: Actor['type']; actorId: string | null; actorLabel: string | null }[]>`
    select distinct on (actor_type, actor_id) actor_type, actor_id, actor_label
    from audit_log order by actor_type, actor_id, id desc limit 500`;
}

/** The entry as the API, the CLI and the dashboard show it (CONTRACT §21.4). */
export function toAuditEntry(r: AuditRow) {
  return {
    id: r.id,
    at: r.at.toISOString(),
    actor: { type: r.actorType, id: r.actorId, label: r.actorLabel },
    action: r.action,
    project_id: r.projectId,
    target: { type: r.targetType, id: r.targetId },
    ip: r.ip,
    changes: r.changes,
  };
}
