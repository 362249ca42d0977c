import { z } from '@hono/zod-openapi';
import { ApiError, ValidationError } from '../http/errors.ts';
import type { Sql, TxSql } from '../platform/db.ts';
import { isWellFormedId, newId } from '../platform/ids.ts';
import { text } from '../emails/validate.ts';
import { recordAudit } from '../audit/record.ts';
import { parse } from './service.ts';
import { MAX_PROPERTY_STRING, PROPERTY_KEY } from './schemas.ts';
import * as q from './property-queries.ts';

/**
 * Contact properties (§23.1): the keys a contact's `properties` may hold, each a string or a
 * number, with the value a broadcast's placeholder falls back to. The type is fixed at creation.
 */

const Fallback = z.union([text().max(MAX_PROPERTY_STRING), z.number().finite()]).nullable().optional()
  .openapi({ description: 'What a placeholder shows for a contact without a value; of the property\'s type.' });

export const CreatePropertyRequest = z.object({
  key: z.string().regex(PROPERTY_KEY, 'A property key is 1 to 50 of A-Z, a-z, 0-9 and _').openapi({ example: 'plan' }),
  type: z.enum(['string', 'number']),
  fallback_value: Fallback,
}).openapi('CreateContactPropertyRequest');
export const UpdatePropertyRequest = z.object({ fallback_value: Fallback }).openapi('UpdateContactPropertyRequest');

export const PropertyResponse = z.object({
  object: z.literal('contact_property'),
  id: z.string().openapi({ example: 'cprop_01JD5Q2V3N9C8X7B6A5Z4Y3W2V' }),
  key: z.string(),
  type: z.enum(['string', 'number']),
  fallback_value: z.union([z.string(), z.number()]).nullable(),
  created_at: z.string().openapi({ format: 'date-time' }),
}).openapi('ContactProperty');
export const PropertyList = z.object({ data: z.array(PropertyResponse), has_more: z.boolean() }).openapi('ContactPropertyList');

export const toPropertyResponse = (p: q.ContactPropertyRow): z.infer<typeof PropertyResponse> => ({
  object: 'contact_property', id: p.id, key: p.key, type: p.type, fallback_value: p.fallbackValue, created_at: p.createdAt.toISOString(),
});

function checkFallback(type: q.PropertyType, value: string | number | null | undefined) {
  if (value !== null && value !== undefined && typeof value !== type) {
    throw new ValidationError([{ loc: ['body', 'fallback_value'], msg: `The fallback of a ${type} property must be a ${type}`, type: type === 'number' ? 'float_type' : 'string_type' }]);
  }
}

export async function requireProperty(sql: Sql | TxSql, projectId: string, id: string) {
  const property = isWellFormedId('contactProperty', id) ? await q.getProperty(sql, projectId, id) : undefined;
  if (!property) throw new ApiError('not_found', 'Contact property not found.');
  return property;
}

export async function createProperty(sql: Sql, projectId: string, body: unknown) {
  const input = parse(CreatePropertyRequest, body);
  checkFallback(input.type, input.fallback_value);
  return sql.begin(async (tx) => {
    const property = await q.insertProperty(tx, { id: newId('contactProperty'), projectId, key: input.key, type: input.type, fallbackValue: input.fallback_value ?? null });
    if (!property) {
      const existing = await q.getPropertyByKey(tx, projectId, input.key);
      throw new ApiError('contact_property_exists', `A contact property with key ${input.key} already exists: ${existing?.id ?? 'unknown'}.`).with({ contact_property_id: existing?.id ?? '' });
    }
    await recordAudit(tx, { action: 'contact_property.created', projectId, target: { type: 'contact_property', id: property.id }, changes: { key: property.key, type: property.type, fallback_value: property.fallbackValue } });
    return property;
  });
}

export async function updateProperty(sql: Sql, projectId: string, id: string, body: unknown) {
  const input = parse(UpdatePropertyRequest, body);
  const current = await requireProperty(sql, projectId, id);
  checkFallback(current.type, input.fallback_value);
  return sql.begin(async (tx) => {
    const property = await q.setFallback(tx, projectId, id, input.fallback_value ?? null);
    if (!property) return requireProperty(tx, projectId, id);
    await recordAudit(tx, { action: 'contact_property.updated', projectId, target: { type: 'contact_property', id }, changes: { key: property.key, fallback_value: property.fallbackValue } });
    return property;
  });
}

/** Every contact's value for it goes too. */
export async function deleteProperty(sql: Sql, projectId: string, id: string) {
  const property = await requireProperty(sql, projectId, id);
  await sql.begin(async (tx) => {
    if (!await q.deleteProperty(tx, projectId, id)) return;
    await recordAudit(tx, { action: 'contact_property.deleted', projectId, target: { type: 'contact_property', id }, changes: { key: property.key } });
  });
  return property;
}
