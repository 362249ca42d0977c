import type { Sql, TxSql } from '../platform/db.ts';
import { recordProjectEvent, type ContactEventType } from '../events/record.ts';
import { effectiveSubscriptionSql, type Subscription } from './subscription.ts';

/** The `data` of every contact.* webhook event (CONTRACT §23.1). */
export type ContactEventData = {
  id: string;
  email: string;
  first_name: string | null;
  last_name: string | null;
  unsubscribed: boolean;
  segment_ids: string[];
  /** The contact's effective subscription to each of the project's topics, oldest topic first. */
  topics: { id: string; subscription: Subscription }[];
  created_at: string;
};

/** The contact's state as its events carry it, read in one statement; undefined when there is no such contact. */
export async function contactEventData(sql: Sql | TxSql, projectId: string, contactId: string): Promise<ContactEventData | undefined> {
  const [row] = await sql<[{ data: ContactEventData }?]>`
    select jsonb_build_object(
      'id', c.id, 'email', c.email, 'first_name', c.first_name, 'last_name', c.last_name, 'unsubscribed', c.unsubscribed,
      'segment_ids', array(select cs.segment_id from contact_segments cs where cs.contact_id = c.id order by cs.created_at, cs.segment_id),
      'topics', coalesce((
        select jsonb_agg(jsonb_build_object('id', t.id, 'subscription', ${effectiveSubscriptionSql(sql)}) order by t.id)
        from topics t left join contact_topics ct on ct.contact_id = c.id and ct.topic_id = t.id
        where t.project_id = c.project_id), '[]'::jsonb),
      'created_at', to_char(c.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) as data
    from contacts c where c.id = ${contactId} and c.project_id = ${projectId}`;
  return row?.data;
}

/**
 * Records a contact.* webhook event in the caller's transaction, with `email_id` null and `data`
 * the contact's current state. For `contact.deleted`, read the state with contactEventData before
 * deleting and pass it as `snapshot`. Imports and the unsubscribe flow call this too, so every
 * change to a contact announces itself the same way. Returns false when there was no contact.
 */
export async function recordContactEvent(
  tx: TxSql, projectId: string, contactId: string, type: ContactEventType, snapshot?: ContactEventData,
): Promise<boolean> {
  const data = snapshot ?? await contactEventData(tx, projectId, contactId);
  if (!data) return false;
  await recordProjectEvent(tx, projectId, type, data);
  return true;
}
