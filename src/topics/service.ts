import { z } from '@hono/zod-openapi';
import { ApiError, ValidationError } from '../http/errors.ts';
import type { Sql, TxSql } from '../platform/db.ts';
import { isWellFormedId, newId } from '../platform/ids.ts';
import { text } from '../emails/validate.ts';
import { recordAudit } from '../audit/record.ts';
import { parse } from '../contacts/service.ts';
import * as q from './queries.ts';

/**
 * Topics (§23.1): what a contact may subscribe to. `default_subscription` is fixed at creation:
 * an `opt_in` topic reaches everyone but those who opted out, an `opt_out` topic only those who
 * opted in (src/contacts/subscription.ts).
 */

const fields = {
  name: text().trim().min(1).max(50).openapi({ example: 'Product updates' }),
  description: text().max(200).nullable().optional().openapi({ example: 'New features, once a month' }),
  visibility: z.enum(['public', 'private']).optional().openapi({ description: '`public` topics are offered on the unsubscribe page. Default `private`.' }),
};
export const CreateTopicRequest = z.object({ ...fields, default_subscription: z.enum(['opt_in', 'opt_out']) }).openapi('CreateTopicRequest');
// The Resend SDK echoes the topic's id in the body of an update: ignored, never an error.
export const UpdateTopicRequest = z.object({ ...fields, name: fields.name.optional() }).openapi('UpdateTopicRequest');

export const TopicResponse = z.object({
  object: z.literal('topic'),
  id: z.string().openapi({ example: 'topic_01JD5Q2V3N9C8X7B6A5Z4Y3W2V' }),
  name: z.string(),
  description: z.string().nullable(),
  default_subscription: z.enum(['opt_in', 'opt_out']),
  visibility: z.enum(['public', 'private']),
  created_at: z.string().openapi({ format: 'date-time' }),
}).openapi('Topic');
export const TopicList = z.object({ data: z.array(TopicResponse), has_more: z.boolean() }).openapi('TopicList');

export const toTopicResponse = (t: q.TopicRow): z.infer<typeof TopicResponse> => ({
  object: 'topic', id: t.id, name: t.name, description: t.description, default_subscription: t.defaultSubscription,
  visibility: t.visibility, created_at: t.createdAt.toISOString(),
});

export async function requireTopic(sql: Sql | TxSql, projectId: string, id: string) {
  const topic = isWellFormedId('topic', id) ? await q.getTopic(sql, projectId, id) : undefined;
  if (!topic) throw new ApiError('not_found', 'Topic not found.');
  return topic;
}

export async function createTopic(sql: Sql, projectId: string, body: unknown) {
  const input = parse(CreateTopicRequest, body);
  return sql.begin(async (tx) => {
    const topic = await q.insertTopic(tx, {
      id: newId('topic'), projectId, name: input.name, description: input.description ?? null,
      defaultSubscription: input.default_subscription, visibility: input.visibility ?? 'private',
    });
    await recordAudit(tx, {
      action: 'topic.created', projectId, target: { type: 'topic', id: topic.id },
      changes: { name: topic.name, description: topic.description, default_subscription: topic.defaultSubscription, visibility: topic.visibility },
    });
    return topic;
  });
}

export async function updateTopic(sql: Sql, projectId: string, id: string, body: unknown) {
  const isObject = body !== null && typeof body === 'object' && !Array.isArray(body);
  const { id: _echoed, ...rest } = (isObject ? body : {}) as Record<string, unknown>;
  if ('default_subscription' in rest) {
    throw new ValidationError([{ loc: ['body', 'default_subscription'], msg: 'default_subscription is fixed when the topic is created', type: 'immutable_field' }]);
  }
  const input = parse(UpdateTopicRequest, isObject ? rest : body);
  await requireTopic(sql, projectId, id);
  return sql.begin(async (tx) => {
    const topic = await q.updateTopic(tx, projectId, id, input);
    if (!topic) return requireTopic(tx, projectId, id);
    await recordAudit(tx, { action: 'topic.updated', projectId, target: { type: 'topic', id }, changes: input });
    return topic;
  });
}

/** The contacts' choices for it go with it (no contact.* event per contact). */
export async function deleteTopic(sql: Sql, projectId: string, id: string) {
  const topic = await requireTopic(sql, projectId, id);
  await sql.begin(async (tx) => {
    if (!await q.deleteTopic(tx, projectId, id)) return;
    await recordAudit(tx, { action: 'topic.deleted', projectId, target: { type: 'topic', id }, changes: { name: topic.name } });
  });
  return topic;
}
