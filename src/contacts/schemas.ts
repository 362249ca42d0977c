import { z } from '@hono/zod-openapi';
import { text } from '../emails/validate.ts';
import { isMailbox } from '../emails/mailbox.ts';
import type { ContactRow } from './queries.ts';

const issue = (type: string, message: string) => ({ message, params: { type } });

export const PROPERTY_KEY = /^[A-Za-z0-9_]{1,50}$/;
/** A string property value, in characters. */
export const MAX_PROPERTY_STRING = 2000;
export const MAX_PROPERTIES = 100;

/** A bare address (no display name), kept as written; unique per project whatever its case. */
export const ContactEmail = text().max(320).transform((s) => s.trim())
  .refine((s) => !/[\s<>]/.test(s) && isMailbox(s), issue('value_error', 'Not a valid email address: expected a bare address such as user@example.com'))
  .openapi({ example: 'ann+news@example.com' });

const Name = text().max(200).nullable().optional();
const PropertyValue = z.union([text().max(MAX_PROPERTY_STRING), z.number().finite()]).nullable();
const Properties = z.record(z.string().regex(PROPERTY_KEY, 'A property key is 1 to 50 of A-Z, a-z, 0-9 and _'), PropertyValue)
  .refine((p) => Object.keys(p).length <= MAX_PROPERTIES, issue('too_long', `At most ${MAX_PROPERTIES} properties`))
  .openapi({ description: 'Values of declared contact properties (string or number, as declared); null clears one.', example: { plan: 'pro', seats: 3 } });

export const Subscription = z.enum(['opt_in', 'opt_out']);
export const TopicChoice = z.object({ id: z.string().max(100), subscription: Subscription }).openapi('ContactTopicChoice');
export const TopicChoices = z.array(TopicChoice).max(100).openapi('ContactTopicChoices');

export const CreateContactRequest = z.object({
  email: ContactEmail,
  first_name: Name,
  last_name: Name,
  unsubscribed: z.boolean().optional().openapi({ description: 'Out of every broadcast. Default false.' }),
  properties: Properties.optional(),
  segment_ids: z.array(z.string().max(100)).max(100).optional().openapi({ description: 'Segments to add the contact to.' }),
  topics: TopicChoices.optional().openapi({ description: 'The contact\'s choice per topic; other topics keep their default.' }),
}).openapi('CreateContactRequest');

export const UpdateContactRequest = z.object({
  first_name: Name,
  last_name: Name,
  unsubscribed: z.boolean().optional(),
  properties: Properties.optional(),
}).openapi('UpdateContactRequest');

export type CreateContact = z.infer<typeof CreateContactRequest>;
export type UpdateContact = z.infer<typeof UpdateContactRequest>;

export const ContactResponse = z.object({
  object: z.literal('contact'),
  id: z.string().openapi({ example: 'contact_01JD5Q2V3N9C8X7B6A5Z4Y3W2V' }),
  email: z.string(),
  first_name: z.string().nullable(),
  last_name: z.string().nullable(),
  unsubscribed: z.boolean(),
  properties: z.record(z.string(), z.union([z.string(), z.number()])),
  segment_ids: z.array(z.string()),
  created_at: z.string().openapi({ format: 'date-time' }),
  updated_at: z.string().openapi({ format: 'date-time' }),
}).openapi('Contact');

export const ContactList = z.object({ data: z.array(ContactResponse), has_more: z.boolean() }).openapi('ContactList');

export function toContactResponse(c: ContactRow): z.infer<typeof ContactResponse> {
  return {
    object: 'contact', id: c.id, email: c.email, first_name: c.firstName, last_name: c.lastName, unsubscribed: c.unsubscribed,
    properties: c.properties, segment_ids: c.segmentIds, created_at: c.createdAt.toISOString(), updated_at: c.updatedAt.toISOString(),
  };
}
