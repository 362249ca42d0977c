import type { Sql } from '../platform/db.ts';

export type EventRow = { id: string; type: string; data: Record<string, unknown>; createdAt: Date };

/** An email's events, oldest first: its timeline. */
export async function listEventsOfEmail(sql: Sql, projectId: string, emailId: string) {
  return sql<EventRow[]>`
    select id, type, data, created_at from events
    where project_id = ${projectId} and email_id = ${emailId}
    order by created_at, id`;
}
