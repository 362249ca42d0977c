import { beginRetryingDeadlocks, type Sql, type TxSql } from '../platform/db.ts';
import { recordContactEvent } from '../contacts/events.ts';

/** What a broadcast's link may change: its contact, and the project's public topics it may choose among. */

export type PreferenceTopic = { id: string; name: string; description: string | null; subscribed: boolean };

export async function contactPreferences(sql: Sql, projectId: string, contactId: string) {
  const [contact] = await sql<[{ email: string; unsubscribed: boolean }?]>`
    select email, unsubscribed from contacts where id = ${contactId} and project_id = ${projectId}`;
  if (!contact) return undefined;
  const topics = await sql<PreferenceTopic[]>`
    select t.id, t.name, t.description, coalesce(ct.subscription, t.default_subscription) = 'opt_in' as subscribed
    from topics t left join contact_topics ct on ct.topic_id = t.id and ct.contact_id = ${contactId}
    where t.project_id = ${projectId} and t.visibility = 'public'
    order by t.name, t.id`;
  return { ...contact, topics };
}

/**
 * The contact's copies of broadcasts it just left that are still waiting in the queue go no
 * further: a contact who unsubscribes mid-send gets nothing more from it (§23.4). Only the
 * broadcasts under `topicId`, or every one when it left them all. The worker's shared commits may
 * hold some of these copies in another order, so the transactions around it retry a deadlock.
 */
async function cancelQueuedCopies(tx: TxSql, projectId: string, contactId: string, topicId: string | null) {
  await tx`
    update emails e set status = 'canceled', updated_at = now()
    from broadcast_recipients r join broadcasts b on b.id = r.broadcast_id and b.project_id = r.project_id
    where r.contact_id = ${contactId} and r.project_id = ${projectId} and r.email_id is not null
      and b.status = 'sending' ${topicId ? tx`and b.topic_id = ${topicId}` : tx``}
      and e.id = r.email_id and e.project_id = r.project_id and e.status = 'queued'`;
}

/** Out of every broadcast (`unsubscribed: true`), firing `contact.updated`. False when the contact is gone. */
export async function unsubscribeContact(sql: Sql, projectId: string, contactId: string): Promise<boolean> {
  return beginRetryingDeadlocks(sql, async (tx) => {
    const [row] = await tx<[{ changed: boolean }?]>`
      update contacts set unsubscribed = true, updated_at = now()
      where id = ${contactId} and project_id = ${projectId}
      returning true as changed`;
    if (!row) return false;
    await cancelQueuedCopies(tx, projectId, contactId, null);
    await recordContactEvent(tx, projectId, contactId, 'contact.updated');
    return true;
  });
}

/**
 * Sets the contact's subscriptions (`opt_in` / `opt_out`) per topic, firing
 * `contact.topics.updated`. Only topics of the project; false when the contact is gone.
 */
export async function setContactTopics(sql: Sql, projectId: string, contactId: string, choices: { topicId: string; subscription: 'opt_in' | 'opt_out' }[]): Promise<boolean> {
  return beginRetryingDeadlocks(sql, async (tx) => {
    const [contact] = await tx`select 1 from contacts where id = ${contactId} and project_id = ${projectId} for update`;
    if (!contact) return false;
    if (choices.length) {
      await tx`
        insert into contact_topics (contact_id, topic_id, project_id, subscription)
        select ${contactId}, t.id, t.project_id, c.subscription
        from jsonb_to_recordset(${tx.json(choices.map((c) => ({ topic_id: c.topicId, subscription: c.subscription })))}) as c(topic_id text, subscription text)
        join topics t on t.id = c.topic_id and t.project_id = ${projectId}
        on conflict (contact_id, topic_id) do update set subscription = excluded.subscription, updated_at = now()`;
      for (const c of choices) if (c.subscription === 'opt_out') await cancelQueuedCopies(tx, projectId, contactId, c.topicId);
    }
    await recordContactEvent(tx, projectId, contactId, 'contact.topics.updated');
    return true;
  });
}
