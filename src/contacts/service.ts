import type { z } from '@hono/zod-openapi';
import { ApiError, ValidationError, validationErrorFromZod, type ValidationDetail } from '../http/errors.ts';
import type { Sql, TxSql } from '../platform/db.ts';
import { isWellFormedId, newId } from '../platform/ids.ts';
import { recordAudit } from '../audit/record.ts';
import { existingSegments, getSegment } from '../segments/queries.ts';
import { existingTopics } from '../topics/queries.ts';
import * as q from './queries.ts';
import { propertiesByKey } from './property-queries.ts';
import { contactEventData, recordContactEvent } from './events.ts';
import { CreateContactRequest, TopicChoices, UpdateContactRequest } from './schemas.ts';

/**
 * Contacts as every surface changes them (`/v1`, `/resend`): validation against the declared
 * properties, segments and topics, and each change with its audit entry and its contact.* event
 * in one transaction.
 */

export function parse<T extends z.ZodTypeAny>(schema: T, body: unknown): z.infer<T> {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw validationErrorFromZod(parsed.error, 'json');
  return parsed.data;
}

/**
 * The contact named by an id or an address (case-insensitive), or undefined. Something that is
 * neither never reaches a query.
 */
export async function findContact(sql: Sql | TxSql, projectId: string, idOrEmail: string) {
  if (!idOrEmail.includes('@') && !isWellFormedId('contact', idOrEmail)) return undefined;
  return q.getContact(sql, projectId, idOrEmail);
}

const notFound = () => new ApiError('not_found', 'Contact not found.');

export async function requireContact(sql: Sql | TxSql, projectId: string, idOrEmail: string) {
  const contact = await findContact(sql, projectId, idOrEmail);
  if (!contact) throw notFound();
  return contact;
}

async function lockContact(tx: TxSql, projectId: string, idOrEmail: string) {
  const contact = !idOrEmail.includes('@') && !isWellFormedId('contact', idOrEmail) ? undefined : await q.lockContact(tx, projectId, idOrEmail);
  if (!contact) throw notFound();
  return contact;
}

/** Every key must be a declared property and every value of its type; each problem names its key. */
async function checkProperties(sql: Sql | TxSql, projectId: string, properties: Record<string, string | number | null> | undefined) {
  if (!properties) return;
  const declared = await propertiesByKey(sql, projectId, Object.keys(properties));
  const problems: ValidationDetail[] = [];
  for (const [key, value] of Object.entries(properties)) {
    const property = declared.get(key);
    const loc = ['body', 'properties', key];
    if (!property) problems.push({ loc, msg: `${key} is not a contact property of this project; declare it first`, type: 'undeclared_property' });
    else if (value !== null && typeof value !== property.type) {
      problems.push({ loc, msg: `${key} is a ${property.type} property`, type: property.type === 'number' ? 'float_type' : 'string_type' });
    }
  }
  if (problems.length) throw new ValidationError(problems);
}

async function checkSegments(sql: Sql | TxSql, projectId: string, ids: string[], at: (string | number)[]) {
  const found = await existingSegments(sql, projectId, ids.filter((id) => isWellFormedId('segment', id)));
  const problems = ids.flatMap((id, i): ValidationDetail[] => (found.has(id) ? [] : [{ loc: [...at, i], msg: `${id} is not a segment of this project`, type: 'unknown_segment' }]));
  if (problems.length) throw new ValidationError(problems);
}

async function checkTopics(sql: Sql | TxSql, projectId: string, choices: { id: string }[], at: (string | number)[]) {
  const found = await existingTopics(sql, projectId, choices.map((c) => c.id).filter((id) => isWellFormedId('topic', id)));
  const problems = choices.flatMap((c, i): ValidationDetail[] => (found.has(c.id) ? [] : [{ loc: [...at, i, 'id'], msg: `${c.id} is not a topic of this project`, type: 'unknown_topic' }]));
  if (problems.length) throw new ValidationError(problems);
}

/** One choice per topic, the last given winning. */
const lastPerTopic = (choices: { id: string; subscription: string }[]) => [...new Map(choices.map((c) => [c.id, c])).values()];

const present = (values: Record<string, unknown>) => Object.keys(values).filter((k) => values[k] !== undefined);

export async function createContact(sql: Sql, projectId: string, body: unknown) {
  const input = parse(CreateContactRequest, body);
  await checkProperties(sql, projectId, input.properties);
  const segmentIds = [...new Set(input.segment_ids ?? [])];
  await checkSegments(sql, projectId, segmentIds, ['body', 'segment_ids']);
  const choices = lastPerTopic(input.topics ?? []);
  await checkTopics(sql, projectId, choices, ['body', 'topics']);
  const properties = Object.fromEntries(Object.entries(input.properties ?? {}).filter(([, v]) => v !== null)) as Record<string, q.PropertyValue>;
  const id = await sql.begin(async (tx) => {
    const inserted = await q.insertContact(tx, {
      id: newId('contact'), projectId, email: input.email, firstName: input.first_name ?? null, lastName: input.last_name ?? null,
      unsubscribed: input.unsubscribed ?? false, properties,
    });
    if (!inserted) {
      const existing = await q.getContact(tx, projectId, input.email);
      throw new ApiError('contact_exists', `A contact with this address already exists: ${existing?.id ?? 'unknown'}.`).with({ contact_id: existing?.id ?? '' });
    }
    for (const segmentId of segmentIds) await q.addToSegment(tx, projectId, inserted, segmentId);
    await q.setTopicChoices(tx, projectId, inserted, choices);
    await recordAudit(tx, { action: 'contact.created', projectId, target: { type: 'contact', id: inserted }, changes: { email: input.email, fields: present(input) } });
    await recordContactEvent(tx, projectId, inserted, 'contact.created');
    return inserted;
  });
  return (await q.getContact(sql, projectId, id))!;
}

export async function updateContact(sql: Sql, projectId: string, idOrEmail: string, body: unknown) {
  const input = parse(UpdateContactRequest, body);
  const id = await sql.begin(async (tx) => {
    const contact = await lockContact(tx, projectId, idOrEmail);
    await checkProperties(tx, projectId, input.properties);
    await q.updateContact(tx, projectId, contact.id, {
      firstName: input.first_name, lastName: input.last_name, unsubscribed: input.unsubscribed,
      properties: input.properties as q.ContactChange['properties'],
    });
    await recordAudit(tx, { action: 'contact.updated', projectId, target: { type: 'contact', id: contact.id }, changes: { email: contact.email, fields: present(input) } });
    await recordContactEvent(tx, projectId, contact.id, 'contact.updated');
    return contact.id;
  });
  return (await q.getContact(sql, projectId, id))!;
}

export async function deleteContact(sql: Sql, projectId: string, idOrEmail: string) {
  return sql.begin(async (tx) => {
    const contact = await lockContact(tx, projectId, idOrEmail);
    const snapshot = await contactEventData(tx, projectId, contact.id);
    await q.deleteContact(tx, projectId, contact.id);
    await recordAudit(tx, { action: 'contact.deleted', projectId, target: { type: 'contact', id: contact.id }, changes: { email: contact.email } });
    await recordContactEvent(tx, projectId, contact.id, 'contact.deleted', snapshot);
    return contact;
  });
}

/** The segment of a path, or 404. */
export async function requireSegment(sql: Sql | TxSql, projectId: string, segmentId: string) {
  const segment = isWellFormedId('segment', segmentId) ? await getSegment(sql, projectId, segmentId) : undefined;
  if (!segment) throw new ApiError('not_found', 'Segment not found.');
  return segment;
}

/** Adds the contact to the segment; a contact already in it is left as it is (no event). */
export async function addContactToSegment(sql: Sql, projectId: string, idOrEmail: string, segmentId: string) {
  return sql.begin(async (tx) => {
    const segment = await requireSegment(tx, projectId, segmentId);
    const contact = await lockContact(tx, projectId, idOrEmail);
    if (await q.addToSegment(tx, projectId, contact.id, segment.id)) {
      await recordAudit(tx, { action: 'contact.segment_added', projectId, target: { type: 'contact', id: contact.id }, changes: { email: contact.email, segment_id: segment.id } });
      await recordContactEvent(tx, projectId, contact.id, 'contact.updated');
    }
    return { contact, segment };
  });
}

/** Takes the contact out of the segment; 404 when it was not in it. */
export async function removeContactFromSegment(sql: Sql, projectId: string, idOrEmail: string, segmentId: string) {
  return sql.begin(async (tx) => {
    const segment = await requireSegment(tx, projectId, segmentId);
    const contact = await lockContact(tx, projectId, idOrEmail);
    if (!await q.removeFromSegment(tx, projectId, contact.id, segment.id)) throw new ApiError('not_found', 'The contact is not in that segment.');
    await recordAudit(tx, { action: 'contact.segment_removed', projectId, target: { type: 'contact', id: contact.id }, changes: { email: contact.email, segment_id: segment.id } });
    await recordContactEvent(tx, projectId, contact.id, 'contact.updated');
    return { contact, segment };
  });
}

/**
 * Sets the contact's choice for each topic given (a bare array of `{id, subscription}`); topics
 * not named keep what they had. contact.topics.updated fires when a choice changed.
 */
export async function updateContactTopics(sql: Sql, projectId: string, idOrEmail: string, body: unknown) {
  const choices = lastPerTopic(parse(TopicChoices, body));
  await checkTopics(sql, projectId, choices, ['body']);
  return sql.begin(async (tx) => {
    const contact = await lockContact(tx, projectId, idOrEmail);
    const changed = await q.setTopicChoices(tx, projectId, contact.id, choices);
    if (changed.length) {
      await recordAudit(tx, { action: 'contact.topics_updated', projectId, target: { type: 'contact', id: contact.id }, changes: { email: contact.email, topic_ids: changed } });
      await recordContactEvent(tx, projectId, contact.id, 'contact.topics.updated');
    }
    return contact;
  });
}
