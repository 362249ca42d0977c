import type { Context, Hono } from 'hono';
import { ApiError, ValidationError } from '../../src/http/errors.ts';
import { isWellFormedId } from '../../src/platform/ids.ts';
import { listContacts } from '../../src/contacts/queries.ts';
import { allProperties } from '../../src/contacts/property-queries.ts';
import {
  addContactToSegment, createContact, deleteContact, removeContactFromSegment, requireContact, updateContact, updateContactTopics,
} from '../../src/contacts/service.ts';
import { listSegments, segmentMemberCounts } from '../../src/segments/queries.ts';
import { createSegment, deleteSegment, renameSegment } from '../../src/segments/service.ts';
import { allTopics, listContactTopics } from '../../src/topics/queries.ts';
import { createTopic, deleteTopic, updateTopic } from '../../src/topics/service.ts';
import { BASE, type DashEnv } from '../env.ts';
import { ContactPage, ContactsPage, SegmentsPage, TopicsPage, type ContactsTyped } from '../pages/contacts.tsx';
import { base, errorPage, field, render } from '../render.tsx';
import { urlId } from '../params.ts';
import { listImports } from '../../src/contacts/imports/queries.ts';
import { ImportForm } from '../pages/imports.tsx';

export const CONTACTS_PER_PAGE = 50;
export const SEGMENTS_PER_PAGE = 100;
/** Segments offered in a page's pickers (the contacts filter, a contact's "add to segment"). */
const SEGMENT_CHOICES = 500;
const RECENT_IMPORTS = 5;
/** A segment's member count stops here: the count is one bounded index range, whatever its size. */
export const SEGMENT_COUNT_CAP = 10_000;

/** What a refused form says: each problem of a 422, or the message of a 409. Anything else is rethrown. */
export function problemsOf(err: unknown): string {
  if (err instanceof ValidationError) {
    return err.detail.map((d) => `${d.loc.filter((p) => p !== 'body').join('.') || 'form'}: ${d.msg}`).join(' ');
  }
  if (err instanceof ApiError && err.type !== 'not_found') return err.message;
  throw err;
}

const orNull = (s: string) => (s.trim() === '' ? null : s.trim());

async function segmentChoices(c: Context<DashEnv>) {
  return (await listSegments(c.var.deps.sql, c.var.project.id, { limit: SEGMENT_CHOICES })).rows;
}

/**
 * The contacts list: newest first, paged by id, one address looked up (exact, any case) and
 * narrowed to a segment. `extra` is what a refused add-contact form left to say.
 */
export async function showContacts(c: Context<DashEnv>, extra: { error?: string; importError?: string; typed?: ContactsTyped; status?: 200 | 409 | 422 } = {}) {
  const { sql } = c.var.deps;
  const projectId = c.var.project.id;
  const get = c.req.method === 'GET';
  const search = get ? c.req.query('email')?.trim() || undefined : undefined;
  const segmentId = get ? c.req.query('segment') || undefined : undefined;
  const after = get ? c.req.query('after') || undefined : undefined;
  if (after !== undefined && !isWellFormedId('contact', after)) return errorPage(c, 404, 'Not found', 'That page of contacts does not exist.');
  if (segmentId !== undefined && !isWellFormedId('segment', segmentId)) return errorPage(c, 404, 'Not found', 'There is no such segment.');
  const [page, segments, imports] = await Promise.all([
    listContacts(sql, projectId, { segmentId, email: search }, { limit: CONTACTS_PER_PAGE, startingAfter: after }),
    segmentChoices(c),
    listImports(sql, projectId, { limit: RECENT_IMPORTS }),
  ]);
  return render(
    c,
    <ContactsPage {...base(c)} contacts={page.rows} segments={segments} hasMore={page.hasMore} isFirst={!after}
      search={search} segmentId={segmentId} error={extra.error} typed={extra.typed}>
      <ImportForm project={c.var.project} csrf={c.var.csrf} segments={segments} maxBytes={c.var.deps.config.contactImportMaxBytes}
        error={extra.importError} recent={imports.rows} />
    </ContactsPage>,
    extra.status ?? 200,
  );
}

async function showContact(c: Context<DashEnv>, contactId: string, extra: { error?: string; status?: 200 | 409 | 422 } = {}) {
  const { sql } = c.var.deps;
  const projectId = c.var.project.id;
  const contact = await requireContact(sql, projectId, contactId);
  const [properties, segments, topics] = await Promise.all([
    allProperties(sql, projectId),
    segmentChoices(c),
    listContactTopics(sql, projectId, contact.id, { limit: 100 }),
  ]);
  return render(c, <ContactPage {...base(c)} contact={contact} properties={properties} segments={segments} topics={topics.rows} error={extra.error} />, extra.status ?? 200);
}

async function showTopics(c: Context<DashEnv>, extra: { error?: string; typed?: Record<string, string>; status?: 200 | 422 } = {}) {
  const topics = await allTopics(c.var.deps.sql, c.var.project.id);
  return render(c, <TopicsPage {...base(c)} topics={[...topics].reverse()} error={extra.error} typed={extra.typed} />, extra.status ?? 200);
}

async function showSegments(c: Context<DashEnv>, extra: { error?: string; typed?: string; status?: 200 | 422 } = {}) {
  const { sql } = c.var.deps;
  const after = c.req.method === 'GET' ? c.req.query('after') || undefined : undefined;
  if (after !== undefined && !isWellFormedId('segment', after)) return errorPage(c, 404, 'Not found', 'That page of segments does not exist.');
  const page = await listSegments(sql, c.var.project.id, { limit: SEGMENTS_PER_PAGE, startingAfter: after });
  const members = await segmentMemberCounts(sql, c.var.project.id, page.rows.map((s) => s.id), SEGMENT_COUNT_CAP);
  return render(
    c,
    <SegmentsPage {...base(c)} segments={page.rows} members={members} cap={SEGMENT_COUNT_CAP} hasMore={page.hasMore} isFirst={!after}
      error={extra.error} typed={extra.typed} />,
    extra.status ?? 200,
  );
}

/** Contacts, a contact's page, topics and segments: each change goes through the contacts services (audit entries, contact.* events). */
export function registerContactRoutes(app: Hono<DashEnv>) {
  const project = (c: Context<DashEnv>) => `${BASE}/projects/${c.var.project.id}`;

  app.get('/projects/:projectId/contacts', (c) => showContacts(c));

  app.post('/projects/:projectId/contacts', async (c) => {
    const body = await c.req.parseBody();
    const typed = { email: field(body, 'email'), first_name: field(body, 'first_name'), last_name: field(body, 'last_name') };
    try {
      const contact = await createContact(c.var.deps.sql, c.var.project.id, {
        email: typed.email, first_name: orNull(typed.first_name), last_name: orNull(typed.last_name),
      });
      return c.redirect(`${project(c)}/contacts/${contact.id}`, 303);
    } catch (err) {
      const error = problemsOf(err);
      return showContacts(c, { error, typed, status: err instanceof ApiError ? 409 : 422 });
    }
  });

  app.get('/projects/:projectId/contacts/:contactId', (c) => showContact(c, urlId(c, 'contactId', 'contact')));

  /** Names, the unsubscribed box and every declared property (an empty value clears it). */
  app.post('/projects/:projectId/contacts/:contactId', async (c) => {
    const { sql } = c.var.deps;
    const id = urlId(c, 'contactId', 'contact');
    const body = await c.req.parseBody();
    const declared = await allProperties(sql, c.var.project.id);
    const properties: Record<string, string | number | null> = {};
    for (const p of declared) {
      const raw = body[`prop.${p.key}`];
      if (typeof raw !== 'string') continue;
      const v = raw.trim();
      properties[p.key] = v === '' ? null : p.type === 'number' && Number.isFinite(Number(v)) ? Number(v) : raw;
    }
    try {
      await updateContact(sql, c.var.project.id, id, {
        first_name: orNull(field(body, 'first_name')), last_name: orNull(field(body, 'last_name')),
        unsubscribed: field(body, 'unsubscribed') === 'on', ...(declared.length ? { properties } : {}),
      });
    } catch (err) {
      return showContact(c, id, { error: problemsOf(err), status: 422 });
    }
    return c.redirect(`${project(c)}/contacts/${id}`, 303);
  });

  app.post('/projects/:projectId/contacts/:contactId/segments', async (c) => {
    const id = urlId(c, 'contactId', 'contact');
    await addContactToSegment(c.var.deps.sql, c.var.project.id, id, field(await c.req.parseBody(), 'segment_id'));
    return c.redirect(`${project(c)}/contacts/${id}`, 303);
  });

  app.post('/projects/:projectId/contacts/:contactId/segments/:segmentId/remove', async (c) => {
    const id = urlId(c, 'contactId', 'contact');
    await removeContactFromSegment(c.var.deps.sql, c.var.project.id, id, urlId(c, 'segmentId', 'segment'));
    return c.redirect(`${project(c)}/contacts/${id}`, 303);
  });

  /** One select per topic (`topic.<id>`); only the topics named change. */
  app.post('/projects/:projectId/contacts/:contactId/topics', async (c) => {
    const id = urlId(c, 'contactId', 'contact');
    const body = await c.req.parseBody();
    const choices = Object.entries(body).flatMap(([k, v]) => (k.startsWith('topic.') && typeof v === 'string' ? [{ id: k.slice(6), subscription: v }] : []));
    try {
      await updateContactTopics(c.var.deps.sql, c.var.project.id, id, choices);
    } catch (err) {
      return showContact(c, id, { error: problemsOf(err), status: 422 });
    }
    return c.redirect(`${project(c)}/contacts/${id}`, 303);
  });

  app.post('/projects/:projectId/contacts/:contactId/delete', async (c) => {
    await deleteContact(c.var.deps.sql, c.var.project.id, urlId(c, 'contactId', 'contact'));
    return c.redirect(`${project(c)}/contacts`, 303);
  });

  app.get('/projects/:projectId/topics', (c) => showTopics(c));

  app.post('/projects/:projectId/topics', async (c) => {
    const body = await c.req.parseBody();
    const typed = Object.fromEntries(['name', 'description', 'default_subscription', 'visibility'].map((k) => [k, field(body, k)]));
    try {
      await createTopic(c.var.deps.sql, c.var.project.id, {
        name: typed.name, description: orNull(typed.description!), default_subscription: typed.default_subscription, visibility: typed.visibility || undefined,
      });
    } catch (err) {
      return showTopics(c, { error: problemsOf(err), typed, status: 422 });
    }
    return c.redirect(`${project(c)}/topics`, 303);
  });

  app.post('/projects/:projectId/topics/:topicId', async (c) => {
    const body = await c.req.parseBody();
    try {
      await updateTopic(c.var.deps.sql, c.var.project.id, urlId(c, 'topicId', 'topic'), {
        name: field(body, 'name'), description: orNull(field(body, 'description')), visibility: field(body, 'visibility') || undefined,
      });
    } catch (err) {
      return showTopics(c, { error: problemsOf(err), status: 422 });
    }
    return c.redirect(`${project(c)}/topics`, 303);
  });

  app.post('/projects/:projectId/topics/:topicId/delete', async (c) => {
    await deleteTopic(c.var.deps.sql, c.var.project.id, urlId(c, 'topicId', 'topic'));
    return c.redirect(`${project(c)}/topics`, 303);
  });

  app.get('/projects/:projectId/segments', (c) => showSegments(c));

  app.post('/projects/:projectId/segments', async (c) => {
    const name = field(await c.req.parseBody(), 'name');
    try {
      await createSegment(c.var.deps.sql, c.var.project.id, { name });
    } catch (err) {
      return showSegments(c, { error: problemsOf(err), typed: name, status: 422 });
    }
    return c.redirect(`${project(c)}/segments`, 303);
  });

  app.post('/projects/:projectId/segments/:segmentId', async (c) => {
    const id = urlId(c, 'segmentId', 'segment');
    try {
      await renameSegment(c.var.deps.sql, c.var.project.id, id, { name: field(await c.req.parseBody(), 'name') });
    } catch (err) {
      return showSegments(c, { error: problemsOf(err), status: 422 });
    }
    return c.redirect(`${project(c)}/segments`, 303);
  });

  app.post('/projects/:projectId/segments/:segmentId/delete', async (c) => {
    await deleteSegment(c.var.deps.sql, c.var.project.id, urlId(c, 'segmentId', 'segment'));
    return c.redirect(`${project(c)}/segments`, 303);
  });
}
