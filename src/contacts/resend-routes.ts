import type { Context, Hono } from 'hono';
import type { AppEnv } from '../http/context.ts';
import { readJsonBody } from '../http/body.ts';
import { ApiError } from '../http/errors.ts';
import { isWellFormedId } from '../platform/ids.ts';
import { resendPageQuery } from '../resend/paging.ts';
import { listSegments } from '../segments/queries.ts';
import { listContactTopics, getTopic } from '../topics/queries.ts';
import * as q from './queries.ts';
import { allProperties, getProperty, listProperties } from './property-queries.ts';
import {
  addContactToSegment, createContact, deleteContact, removeContactFromSegment, requireContact, requireSegment, updateContact, updateContactTopics,
} from './service.ts';
import { createProperty, deleteProperty, requireProperty, updateProperty } from './properties.ts';
import { BODY_LIMIT } from './routes.ts';
import { registerResendSegmentRoutes } from '../segments/resend-routes.ts';
import { registerResendTopicRoutes } from '../topics/resend-routes.ts';

/**
 * `resend.contacts.*` (with `.segments` and `.topics`), `resend.contactProperties.*`, and through
 * the segments and topics folders `resend.segments.*`, `resend.audiences.*` and `resend.topics.*`:
 * the same objects as `/v1`, in the Resend SDK's shapes. An audience is a segment: the legacy
 * `/audiences/{id}/contacts…` paths act on the segment with that id.
 */

type C = Context<AppEnv>;

const contactItem = (c: q.ContactRow) => ({
  id: c.id, email: c.email, first_name: c.firstName, last_name: c.lastName, unsubscribed: c.unsubscribed, created_at: c.createdAt.toISOString(),
});

/** Resend's contact, its properties each with the declared type. */
async function resendContact(c: C, contact: q.ContactRow) {
  const types = new Map((await allProperties(c.var.deps.sql, c.var.projectId)).map((p) => [p.key, p.type]));
  const properties = Object.fromEntries(Object.entries(contact.properties)
    .filter(([key]) => types.has(key)).map(([key, value]) => [key, { type: types.get(key)!, value }]));
  return { object: 'contact' as const, ...contactItem(contact), properties };
}

/** A page of contacts, of the project or of one segment, with Resend's after/before cursor. */
async function contactPage(c: C, segmentId?: string) {
  const { limit, after, before, cursor } = resendPageQuery(c);
  const { sql } = c.var.deps;
  if (segmentId !== undefined) await requireSegment(sql, c.var.projectId, segmentId);
  if (cursor !== undefined && !(isWellFormedId('contact', cursor) && await q.getContact(sql, c.var.projectId, cursor))) {
    throw new ApiError('not_found', 'The cursor does not name a contact of this project.');
  }
  const page = await q.listContacts(sql, c.var.projectId, { segmentId }, { limit, startingAfter: after, endingBefore: before });
  return c.json({ object: 'list', has_more: page.hasMore, data: page.rows.map(contactItem) }, 200);
}

/** Resend's create body: `segments: [{id}]` where /v1 takes `segment_ids`. */
function fromResendCreate(body: unknown, audienceId?: string) {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return body;
  const { segments, ...rest } = body as Record<string, unknown>;
  const ids = Array.isArray(segments) ? segments.map((s) => (s && typeof s === 'object' ? (s as { id?: unknown }).id : s)) : segments;
  return { ...rest, ...(ids === undefined && audienceId === undefined ? {} : { segment_ids: [...(Array.isArray(ids) ? ids : ids === undefined ? [] : [ids]), ...(audienceId ? [audienceId] : [])] }) };
}

export function registerResendContactRoutes(app: Hono<AppEnv>) {
  const create = async (c: C, audienceId?: string) => {
    if (audienceId !== undefined) await requireSegment(c.var.deps.sql, c.var.projectId, audienceId);
    const body = fromResendCreate(await readJsonBody(c, BODY_LIMIT), audienceId);
    const contact = await createContact(c.var.deps.sql, c.var.projectId, body);
    return c.json({ object: 'contact' as const, id: contact.id }, 200);
  };
  const get = async (c: C) => c.json(await resendContact(c, await requireContact(c.var.deps.sql, c.var.projectId, c.req.param('contact') ?? '')), 200);
  const update = async (c: C) => {
    const body = await readJsonBody(c, BODY_LIMIT);
    const contact = await updateContact(c.var.deps.sql, c.var.projectId, c.req.param('contact') ?? '', body);
    return c.json({ object: 'contact' as const, id: contact.id }, 200);
  };
  const remove = async (c: C) => {
    const contact = await deleteContact(c.var.deps.sql, c.var.projectId, c.req.param('contact') ?? '');
    return c.json({ object: 'contact' as const, contact: contact.id, deleted: true }, 200);
  };
  /** The legacy paths name a segment as the audience; it must be one of the project's. */
  const inAudience = (handler: (c: C) => Promise<Response>) => async (c: C) => {
    await requireSegment(c.var.deps.sql, c.var.projectId, c.req.param('audience') ?? '');
    return handler(c);
  };

  app.post('/contacts', (c) => create(c));
  app.get('/contacts', (c) => contactPage(c));
  app.get('/contacts/:contact', get);
  app.patch('/contacts/:contact', update);
  app.delete('/contacts/:contact', remove);

  app.post('/audiences/:audience/contacts', (c) => create(c, c.req.param('audience')));
  app.get('/audiences/:audience/contacts', (c) => contactPage(c, c.req.param('audience')));
  app.get('/segments/:segment/contacts', (c) => contactPage(c, c.req.param('segment')));
  app.get('/audiences/:audience/contacts/:contact', inAudience(get));
  app.patch('/audiences/:audience/contacts/:contact', inAudience(update));
  app.delete('/audiences/:audience/contacts/:contact', inAudience(remove));

  app.get('/contacts/:contact/segments', async (c) => {
    const { limit, after, before, cursor } = resendPageQuery(c);
    const { sql } = c.var.deps;
    const contact = await requireContact(sql, c.var.projectId, c.req.param('contact'));
    if (cursor !== undefined) await requireSegment(sql, c.var.projectId, cursor);
    const page = await listSegments(sql, c.var.projectId, { limit, startingAfter: after, endingBefore: before }, contact.id);
    return c.json({ object: 'list', has_more: page.hasMore, data: page.rows.map((s) => ({ id: s.id, name: s.name, created_at: s.createdAt.toISOString() })) }, 200);
  });
  app.post('/contacts/:contact/segments/:segment', async (c) => {
    const { segment } = await addContactToSegment(c.var.deps.sql, c.var.projectId, c.req.param('contact'), c.req.param('segment'));
    return c.json({ id: segment.id }, 200);
  });
  app.delete('/contacts/:contact/segments/:segment', async (c) => {
    const { segment } = await removeContactFromSegment(c.var.deps.sql, c.var.projectId, c.req.param('contact'), c.req.param('segment'));
    return c.json({ id: segment.id, audienceId: segment.id, deleted: true }, 200);
  });

  app.get('/contacts/:contact/topics', async (c) => {
    const { limit, after, before, cursor } = resendPageQuery(c);
    const { sql } = c.var.deps;
    const contact = await requireContact(sql, c.var.projectId, c.req.param('contact'));
    if (cursor !== undefined && !(isWellFormedId('topic', cursor) && await getTopic(sql, c.var.projectId, cursor))) {
      throw new ApiError('not_found', 'The cursor does not name a topic of this project.');
    }
    const page = await listContactTopics(sql, c.var.projectId, contact.id, { limit, startingAfter: after, endingBefore: before });
    return c.json({ object: 'list', has_more: page.hasMore, data: page.rows.map((t) => ({ id: t.id, name: t.name, description: t.description, subscription: t.subscription })) }, 200);
  });
  app.patch('/contacts/:contact/topics', async (c) => {
    const body = await readJsonBody(c, BODY_LIMIT);
    const contact = await updateContactTopics(c.var.deps.sql, c.var.projectId, c.req.param('contact'), body);
    return c.json({ id: contact.id }, 200);
  });

  const propertyItem = (p: Awaited<ReturnType<typeof requireProperty>>) => ({ id: p.id, key: p.key, type: p.type, fallback_value: p.fallbackValue, created_at: p.createdAt.toISOString() });
  app.post('/contact-properties', async (c) => {
    const property = await createProperty(c.var.deps.sql, c.var.projectId, await readJsonBody(c, 16 * 1024));
    return c.json({ object: 'contact_property' as const, id: property.id }, 200);
  });
  app.get('/contact-properties', async (c) => {
    const { limit, after, before, cursor } = resendPageQuery(c);
    const { sql } = c.var.deps;
    if (cursor !== undefined && !(isWellFormedId('contactProperty', cursor) && await getProperty(sql, c.var.projectId, cursor))) {
      throw new ApiError('not_found', 'The cursor does not name a contact property of this project.');
    }
    const page = await listProperties(sql, c.var.projectId, { limit, startingAfter: after, endingBefore: before });
    return c.json({ object: 'list', has_more: page.hasMore, data: page.rows.map(propertyItem) }, 200);
  });
  app.get('/contact-properties/:id', async (c) => c.json({ object: 'contact_property' as const, ...propertyItem(await requireProperty(c.var.deps.sql, c.var.projectId, c.req.param('id'))) }, 200));
  app.patch('/contact-properties/:id', async (c) => {
    const property = await updateProperty(c.var.deps.sql, c.var.projectId, c.req.param('id'), await readJsonBody(c, 16 * 1024));
    return c.json({ object: 'contact_property' as const, id: property.id }, 200);
  });
  app.delete('/contact-properties/:id', async (c) => {
    const property = await deleteProperty(c.var.deps.sql, c.var.projectId, c.req.param('id'));
    return c.json({ object: 'contact_property' as const, id: property.id, deleted: true }, 200);
  });

  registerResendSegmentRoutes(app);
  registerResendTopicRoutes(app);
}
