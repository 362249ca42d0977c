import type { TxSql } from '../platform/db.ts';
import { newId } from '../platform/ids.ts';
import { deliverJob } from '../webhooks/queries.ts';

export const EVENT_TYPES = [
  'email.sent',
  'email.delivered',
  'email.delivery_delayed',
  'email.bounced',
  'email.complained',
  'email.failed',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export type NewEvent = {
  projectId: string;
  emailId: string;
  type: EventType;
  data: Record<string, unknown>;
  /** Provider notifications may repeat; the same key makes the repeat a no-op. */
  dedupeKey?: string;
};

/**
 * Writes the event, with the email's tags added to its `data`, and, in the same transaction, one pending delivery per active endpoint of
 * the project with its `webhook__deliver` job. Returns the event id, or undefined for a duplicate.
 */
export async function recordEvent(tx: TxSql, event: NewEvent): Promise<string | undefined> {
  const [row] = await tx<[{ id: string }?]>`
    insert into events (id, project_id, email_id, type, data, dedupe_key)
    select ${newId('event')}, ${event.projectId}, ${event.emailId}, ${event.type},
           ${tx.json(event.data as never)}::jsonb || jsonb_build_object('tags', coalesce(e.tags, '[]'::jsonb)),
           ${event.dedupeKey ?? null}
    from (select 1) one
    left join emails e on e.id = ${event.emailId} and e.project_id = ${event.projectId}
    on conflict (project_id, dedupe_key) where dedupe_key is not null do nothing
    returning id`;
  if (!row) return undefined;

  const endpoints = await tx<{ id: string }[]>`
    select id from webhook_endpoints where project_id = ${event.projectId} and status = 'active'`;
  for (const endpoint of endpoints) {
    const deliveryId = newId('delivery');
    await tx`
      insert into webhook_deliveries (id, project_id, endpoint_id, event_id, next_attempt_at)
      values (${deliveryId}, ${event.projectId}, ${endpoint.id}, ${row.id}, now())`;
    await tx`select ${deliverJob(tx, deliveryId, event.projectId)}`;
  }
  return row.id;
}
