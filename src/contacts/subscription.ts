import type { Sql, TxSql } from '../platform/db.ts';

/**
 * The subscription rule of topics (CONTRACT §23.1, §23.4), written once. A contact's explicit
 * choice (a contact_topics row) wins; without one, the topic's `default_subscription` holds. So an
 * `opt_in` topic reaches everyone but those who opted out, and an `opt_out` topic only those who
 * opted in.
 */
export type Subscription = 'opt_in' | 'opt_out';

export function effectiveSubscription(defaultSubscription: Subscription, explicit: Subscription | null | undefined): Subscription {
  return explicit ?? defaultSubscription;
}

/**
 * The same rule as a select expression over a `topics` alias and a left-joined `contact_topics`
 * alias (default `t` and `ct`).
 */
export function effectiveSubscriptionSql(sql: Sql | TxSql, topicAlias = 't', choiceAlias = 'ct') {
  return sql`coalesce(${sql(choiceAlias)}.subscription, ${sql(topicAlias)}.default_subscription)`;
}

/**
 * A `where` condition: the contact whose id is in `contactIdColumn` (e.g. `c.id`) receives mail
 * about the topic. It reads the contact_topics primary key once per contact, so a broadcast's
 * recipient query stays an index walk over the segment.
 */
export function receivesTopic(sql: Sql | TxSql, topic: { id: string; defaultSubscription: Subscription }, contactIdColumn: string) {
  const choice = (subscription: Subscription) => sql`exists (
    select 1 from contact_topics ct_rule
    where ct_rule.contact_id = ${sql(contactIdColumn)} and ct_rule.topic_id = ${topic.id} and ct_rule.subscription = ${subscription})`;
  return topic.defaultSubscription === 'opt_in' ? sql`not ${choice('opt_out')}` : choice('opt_in');
}
